#!/usr/bin/python3
"""Example reward server for rlcpp's remote reward (reward.type = "remote").

A ZeroMQ REP socket; each request is one UTF-8 JSON message
    {"requests": [{"prompt": str, "response": str, "terminated": bool, "meta": {...}}, ...]}
and each reply is
    {"rewards": [{"total": float, "components": {name: float}, "correct": bool}, ...]}
(or, with --plain, bare numbers). It scores addition problems the way rlcpp's format scorer does: 1.0 for the
exact answer then EOS, 0.1 for a canonical non-negative integer then EOS, 0 otherwise. The answer comes from
meta["answer"] when present, else from parsing a prompt "a+b=".

The flags let tests drive the failure modes: --delay (slow server), --malformed MODE (bad replies), --chaos SEED
(scripts/soak.sh: a random tenth of the replies late by --chaos-delay seconds, a twentieth dropped).
Prints "READY <bound endpoint>" on stdout once bound, so `--endpoint tcp://127.0.0.1:*` picks a free port.
Needs python3-zmq. Stop it with SIGTERM or Ctrl-C.
"""
import argparse
import json
import random
import re
import sys
import time

import zmq

CANONICAL_NON_NEGATIVE = re.compile(r"0|[1-9][0-9]*")
ADD_PROMPT = re.compile(r"([0-9]+)\+([0-9]+)=")


def reference_answer(request):
    meta = request.get("meta") or {}
    if isinstance(meta.get("answer"), str):
        return meta["answer"]
    m = ADD_PROMPT.fullmatch(request.get("prompt", ""))
    return str(int(m.group(1)) + int(m.group(2))) if m else None


def score(request):
    answer = reference_answer(request)
    response = request.get("response", "")
    terminated = bool(request.get("terminated", False))
    correct = terminated and answer is not None and response == answer
    well_formed = CANONICAL_NON_NEGATIVE.fullmatch(response) is not None
    total = 1.0 if correct else (0.1 if terminated and well_formed else 0.0)
    return {"total": total, "components": {"correct": float(correct), "well_formed": float(well_formed)},
            "correct": correct}


def reply_for(message, args):
    try:
        requests = json.loads(message)["requests"]
        if not isinstance(requests, list):
            raise ValueError("'requests' is not a list")
    except (ValueError, KeyError, TypeError) as e:
        return json.dumps({"error": "bad request: %s" % e}).encode()
    rewards = [score(r) for r in requests]
    if args.plain:
        rewards = [r["total"] for r in rewards]
    if args.malformed == "json":
        return b'{"rewards": [1.0, '
    if args.malformed == "count":
        rewards = rewards[:-1]
    if args.malformed == "type":
        rewards = [str(r) for r in rewards]
    if args.malformed == "error":
        return json.dumps({"error": "scoring backend unavailable"}).encode()
    return json.dumps({"rewards": rewards}).encode()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", default="tcp://127.0.0.1:5555", help="ZeroMQ endpoint to bind")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to sleep before each reply")
    parser.add_argument("--delay-count", type=int, default=-1,
                        help="delay only the first N requests (default: all)")
    parser.add_argument("--malformed", nargs="?", const="json", choices=["json", "count", "type", "error"],
                        help="send bad replies: json (not JSON), count (one reward short), type (strings), "
                             "error (an error reply)")
    parser.add_argument("--plain", action="store_true", help="reply with bare numbers instead of objects")
    parser.add_argument("--chaos", type=int, default=None,
                        help="seed: delay a random 10%% of the replies by --chaos-delay seconds and drop 5%% (the "
                             "socket is closed unanswered and bound again, as a crashed server would be)")
    parser.add_argument("--chaos-delay", type=float, default=2.0, help="seconds a --chaos delay lasts")
    args = parser.parse_args()

    context = zmq.Context()

    def bound(endpoint):
        for _ in range(100):  # a port just released can take a moment to bind again
            s = context.socket(zmq.REP)
            s.setsockopt(zmq.LINGER, 0)
            try:
                s.bind(endpoint)
                return s
            except zmq.ZMQError:
                s.close()
                time.sleep(0.05)
        raise RuntimeError("cannot bind " + endpoint)

    socket = bound(args.endpoint)
    endpoint = socket.getsockopt_string(zmq.LAST_ENDPOINT)
    print("READY", endpoint, flush=True)
    chaos = random.Random(args.chaos) if args.chaos is not None else None
    served = 0
    try:
        while True:
            message = socket.recv()
            if chaos:
                r = chaos.random()
                if r < 0.05:  # dropped: the client times out and resends on a new socket
                    socket.close()
                    socket = bound(endpoint)
                    print("chaos: dropped a request", flush=True)
                    continue
                if r < 0.15:
                    print("chaos: delaying a reply", flush=True)
                    time.sleep(args.chaos_delay)
            if args.delay > 0 and (args.delay_count < 0 or served < args.delay_count):
                time.sleep(args.delay)
            socket.send(reply_for(message, args))
            served += 1
    except KeyboardInterrupt:
        pass
    finally:
        socket.close()
        context.term()


if __name__ == "__main__":
    sys.exit(main())
