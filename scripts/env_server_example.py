#!/usr/bin/python3
"""Example environment server for rlcpp's external environments (agent.env = "remote", agent/remote_env.h).

A ZeroMQ ROUTER socket; every episode of the run connects its own DEALER and sends one UTF-8 JSON message per call:
    {"type": "reset", "request": n, "episode": KEY, "item": {"prompt", "answer", "meta", "id"}}
        -> {"request": n, "observation": str, "tools": [...]}            (tools optional)
    {"type": "step", "request": n, "episode": KEY,
     "turn": {"text": str, "tool_calls": [{"name", "arguments"}], "parse_error": str, "ended": bool}}
        -> {"request": n, "observation": str, "reward": float, "done": bool, "success": bool, "error": bool}
    {"type": "close", "request": n, "episode": KEY}                        (no reply)
A reply may be {"request": n, "error": str} instead. It plays the guess task (task "guess": a hidden number in
[0, 999], meta["secret"]): each turn is a guess, answered "+" (higher) or "-" (lower), or with --interval the range
left ("(501 999)"); finding it on turn t of at most --max-turns pays (K + 1 - t) / K, like rlcpp's in-process guess
environment.

The flags let tests drive the failure modes: --delay S (every reply S seconds late), --malformed MODE (json: a reply
that is not JSON; fields: a reply without "done"), --die-after N (exit without replying on the N-th call).
Prints "READY <bound endpoint>" on stdout once bound, so `--endpoint tcp://127.0.0.1:*` picks a free port.
Needs python3-zmq. Stop it with SIGTERM or Ctrl-C.
"""
import argparse
import json
import re
import sys
import time

import zmq

GUESS = re.compile(r"0|[1-9][0-9]{0,2}")
MAX = 999


class GuessEpisode:
    def __init__(self, item, max_turns, interval):
        meta = item.get("meta") or {}
        self.secret = int(meta.get("secret", item.get("answer", 0)))
        self.max_turns = max_turns
        self.interval = interval
        self.turns = 0
        self.low, self.high = 0, MAX

    def step(self, turn):
        self.turns += 1
        text = turn.get("text", "")
        if turn.get("parse_error") or turn.get("tool_calls") or not GUESS.fullmatch(text):
            return {"observation": "guess a whole number in [0, %d]" % MAX, "reward": 0.0, "done": False,
                    "error": True}
        guess = int(text)
        if guess == self.secret:
            turns = min(self.turns, self.max_turns)
            return {"observation": "", "reward": (self.max_turns + 1 - turns) / self.max_turns, "done": True,
                    "success": True}
        if guess < self.secret:
            self.low = max(self.low, guess + 1)
        else:
            self.high = min(self.high, guess - 1)
        if self.interval:  # agent.guess_feedback "interval": the range left, as the prompt writes it
            return {"observation": "(%d %d)" % (self.low, self.high), "reward": 0.0, "done": False}
        return {"observation": "+" if guess < self.secret else "-", "reward": 0.0, "done": False}


def handle(message, episodes, args):
    """The reply to one request (a dict), or None for a close."""
    try:
        request = json.loads(message)
        kind, number, key = request["type"], request["request"], request["episode"]
    except (ValueError, KeyError, TypeError) as e:
        return {"request": -1, "error": "bad request: %s" % e}
    if kind == "close":
        episodes.pop(key, None)
        return None
    if kind == "reset":
        episodes[key] = GuessEpisode(request.get("item") or {}, args.max_turns, args.interval)
        return {"request": number, "observation": (request.get("item") or {}).get("prompt", "")}
    if kind == "step":
        if key not in episodes:
            return {"request": number, "error": "unknown episode %s (no reset)" % key}
        reply = episodes[key].step(request.get("turn") or {})
        reply["request"] = number
        if args.malformed == "fields":
            reply.pop("done")
        return reply
    return {"request": number, "error": "unknown request type %r" % kind}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", default="tcp://127.0.0.1:5557")
    parser.add_argument("--max-turns", type=int, default=16, help="K of the reward (agent.max_turns)")
    parser.add_argument("--interval", action="store_true",
                        help="answer a wrong guess with the range left, \"(501 999)\" (agent.guess_feedback "
                             "\"interval\", configs/agent_guess.json) instead of \"+\" / \"-\"")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each reply comes late")
    parser.add_argument("--malformed", choices=["json", "fields"], help="send bad replies")
    parser.add_argument("--die-after", type=int, default=0, help="exit without replying on the N-th call (0: never)")
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(args.endpoint)
    print("READY %s" % socket.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
    episodes = {}
    calls = 0
    try:
        while True:
            identity, message = socket.recv_multipart()
            calls += 1
            if args.die_after and calls >= args.die_after:
                sys.exit(3)
            reply = handle(message, episodes, args)
            if reply is None:
                continue
            if args.delay > 0:
                time.sleep(args.delay)
            payload = b'{"request": ' if args.malformed == "json" else json.dumps(reply).encode()
            socket.send_multipart([identity, payload])
    except KeyboardInterrupt:
        pass
    finally:
        socket.close(0)
        context.term()


if __name__ == "__main__":
    main()
