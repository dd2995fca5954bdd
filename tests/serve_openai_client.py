"""`rlcpp serve` through the pinned `openai` Python client (scripts/ensure_python.sh): models, a completion, a chat
completion, the same chat streamed (same seed, same text), token ids through vLLM's extra field, and a 400 that
names its field; "tools" with a history holding a tool call and the tool's reply (the prompt's token ids equal
transformers' apply_chat_template of the same conversation and tools, from TOKENIZER_DIR); a "stop" string taken
from a greedy reply cuts it there. Usage: serve_openai_client.py PORT API_KEY MODEL TOKENIZER_DIR. Prints "ok" and
exits 0 when all hold."""
import sys

import openai
import transformers

port, key, model, tokenizer_dir = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0, timeout=120)

assert [m.id for m in client.models.list().data] == [model]

completion = client.completions.create(model=model, prompt="The capital of France is", max_tokens=6, seed=3,
                                       extra_body={"return_token_ids": True})
choice = completion.choices[0]
assert isinstance(choice.text, str) and choice.finish_reason in ("stop", "length"), completion
token_ids = choice.model_extra["token_ids"]
assert 1 <= len(token_ids) <= 6 and completion.usage.completion_tokens == len(token_ids), completion

messages = [{"role": "system", "content": "You add numbers."}, {"role": "user", "content": "What is 2+3?"}]
chat = client.chat.completions.create(model=model, messages=messages, max_tokens=8, seed=11, temperature=0.8,
                                      logprobs=True, top_logprobs=2)
text = chat.choices[0].message.content
assert chat.choices[0].message.role == "assistant" and isinstance(text, str), chat
assert len(chat.choices[0].logprobs.content) == chat.usage.completion_tokens, chat
assert all(len(t.top_logprobs) == 2 for t in chat.choices[0].logprobs.content), chat

streamed, finish = "", None
for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=8, seed=11, temperature=0.8,
                                            stream=True):
    if chunk.choices:
        streamed += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
assert streamed == text, (streamed, text)
assert finish == chat.choices[0].finish_reason, (finish, chat)

tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city now.",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]}}}]
history = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "Weather in Paris?"},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "call_0", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
           {"role": "tool", "tool_call_id": "call_0", "content": "18C and sunny"}]
tooled = client.chat.completions.create(model=model, messages=history, tools=tools, tool_choice="auto", max_tokens=6,
                                        seed=5, extra_body={"return_token_ids": True})
# Qwen3's template cannot render content None; the server reads it as "" (what the template then writes).
want = transformers.AutoTokenizer.from_pretrained(tokenizer_dir).apply_chat_template(
    [dict(m, content=m["content"] or "") for m in history], tools=tools, add_generation_prompt=True, tokenize=True)
assert tooled.model_extra["prompt_token_ids"] == list(want), (tooled.model_extra["prompt_token_ids"], want)
assert tooled.choices[0].finish_reason in ("stop", "length", "tool_calls"), tooled

greedy = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
reply = greedy.choices[0].message.content
# Two characters whose first place is `cut` (>= 1 when the reply has such; a repetitive one may not: then 0).
assert len(reply) >= 2, greedy
cut = next((i for i in range(1, len(reply) - 1) if reply.find(reply[i:i + 2]) == i and "\ufffd" not in reply[i:i + 2]),
           0)
stopped = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0,
                                         stop=["never said", reply[cut:cut + 2]])
assert stopped.choices[0].message.content == reply[:cut], (stopped, reply, cut)
assert stopped.choices[0].finish_reason == "stop", stopped

try:
    client.completions.create(model=model, prompt="x", max_tokens=10**7)
    raise AssertionError("max_tokens past the limit was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400 and e.body["param"] == "max_tokens", e.body

try:
    openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong", max_retries=0).models.list()
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError:
    pass
print("ok")
