#!/usr/bin/env python3
"""An agent harness for rlcpp's harness mode (agent.env "http", README "Agent harnesses").

rlcpp runs this once per step (or, with agent.turns_per_draw > 0, once for the whole run): episodes arrive on
stdin as JSON lines ({"session", "item", "episode", "group_size", "prompt", "answer", "meta", "step"}), each
played as soon as it arrives against the OpenAI-compatible server at $OPENAI_BASE_URL with the official `openai`
client, every request of an episode carrying the header "X-Session-Id: SESSION"; one line {"session", "reward",
"success"} goes to stdout as each episode ends (flushed; logs to stderr). The server keeps each session's tokens
and KV cache between requests and records exactly what the model read and sampled: that is what rlcpp trains on,
whatever text this harness sends back. Episodes are asyncio tasks over the `openai` AsyncOpenAI client: with
agent.turns_per_draw a request may wait while the trainer updates and the weights are synced, so every episode
must be kept going at once (--concurrency 0, the default).

The game, for rlcpp's text tasks (add3, ...): the model answers the prompt; a wrong answer is followed by the
prompt again, up to --attempts answers. Completions (the character tokenizer's W1 model): the next prompt is the
last one, the model's answer, a space and the question again. --chat (a model with a chat template): the
conversation goes on with the assistant's reply and a user message asking again.
  --reward answer   1 for a right first answer, 1/k for one right at attempt k, 0 otherwise (the default)
  --reward digits   every attempt is made; the mean share of digits in the answers (a toy preference any model
                    learns in a few steps: the test's)
--log FILE writes, per episode, each turn's prompt token ids and sampled token ids as the server returned them.

  rlcpp train configs/agent_harness.json     (agent.harness = "python3 scripts/agent_harness_example.py")
"""
import argparse
import asyncio
import json
import os
import sys
import traceback

import httpx
import openai


async def play(client, args, item):
    headers = {os.environ.get("RLCPP_SESSION_HEADER", "X-Session-Id"): item["session"]}
    model = os.environ.get("RLCPP_MODEL", "policy")
    question, answer = item["prompt"], str(item["answer"])
    prompt, messages, turns, scores, reward, success = question, [{"role": "user", "content": question}], [], [], 0.0, False
    for attempt in range(args.attempts):
        if args.chat:
            r = await client.chat.completions.create(model=model, messages=messages, max_tokens=args.max_tokens,
                                                     extra_headers=headers, extra_body={"return_token_ids": True})
            text = r.choices[0].message.content or ""
            turns.append({"prompt_token_ids": r.model_extra.get("prompt_token_ids"),
                          "token_ids": r.choices[0].model_extra.get("token_ids")})
        else:
            r = await client.completions.create(model=model, prompt=prompt, max_tokens=args.max_tokens,
                                                extra_headers=headers, extra_body={"return_token_ids": True})
            text = r.choices[0].text
            turns.append({"prompt_token_ids": r.choices[0].model_extra.get("prompt_token_ids"),
                          "token_ids": r.choices[0].model_extra.get("token_ids")})
        said = text.strip()
        if args.reward == "digits":
            scores.append(sum(c.isdigit() for c in said) / max(1, len(said)))
        elif said == answer:
            reward, success = 1.0 / (attempt + 1), True
            break
        if attempt + 1 < args.attempts:
            prompt = prompt + text + " " + question
            messages = messages + [{"role": "assistant", "content": text},
                                   {"role": "user", "content": "No. " + question}]
    if args.reward == "digits":
        reward = sum(scores) / len(scores)
    return {"session": item["session"], "reward": reward, "success": success}, turns


async def serve_episodes(args):
    # OPENAI_BASE_URL and OPENAI_API_KEY: rlcpp sets them. No cap on connections: a request may wait for a draw.
    client = openai.AsyncOpenAI(max_retries=0, timeout=3600, http_client=openai.DefaultAsyncHttpxClient(
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=100)))
    slots = asyncio.Semaphore(args.concurrency) if args.concurrency > 0 else None
    rewards = []

    async def episode(item):
        try:
            if slots:
                async with slots:
                    line, turns = await play(client, args, item)
            else:
                line, turns = await play(client, args, item)
        except BaseException:  # the run stops naming this harness's exit
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            os._exit(1)
        print(json.dumps(line), flush=True)
        rewards.append(line["reward"])
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps({"session": line["session"], "turns": turns}) + "\n")

    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    tasks = []
    while raw := await stdin.readline():  # each episode as it arrives
        if raw.strip():
            tasks.append(asyncio.create_task(episode(json.loads(raw))))
    await asyncio.gather(*tasks)
    await client.close()
    return rewards


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attempts", type=int, default=2, help="answers an episode may give")
    p.add_argument("--reward", choices=["answer", "digits"], default="answer")
    p.add_argument("--chat", action="store_true", help="/v1/chat/completions instead of /v1/completions")
    p.add_argument("--max-tokens", type=int, default=8, help="max_tokens of each request (the run caps it too)")
    p.add_argument("--concurrency", type=int, default=0, help="episodes played at once (0: all that arrived)")
    p.add_argument("--log", help="append each episode's turns (token ids as the server returned them) here")
    args = p.parse_args()
    rewards = asyncio.run(serve_episodes(args))
    print(f"harness: {len(rewards)} episodes, mean reward {sum(rewards) / max(1, len(rewards)):.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
