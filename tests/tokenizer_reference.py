"""Hugging Face `tokenizers` as the reference for rlcpp's BPE tokenizer (tests/tokenizer_bpe_test.cpp).

  encode TOKENIZER_JSON CORPUS_JSONL OUT_JSON   ids, decode and decode(skip_special) of every {"text"} line
  make-llama3 CORPUS_JSONL OUT_DIR              a Llama-3-style tokenizer.json: Llama-3's split regex, ByteLevel
                                                without its regex, ignore_merges, <|begin_of_text|> put before
                                                each sequence by a TemplateProcessing, with whole words in the
                                                vocabulary that no merge reaches (so ignore_merges matters)
  make-gpt2 CORPUS_JSONL OUT_DIR                GPT-2 style: ByteLevel with its own regex and add_prefix_space
  split-cases CORPUS_JSONL OUT_DIR              OUT_DIR/NAME/tokenizer.json and reference.json (as encode) for
                                                each Split pattern x behaviour of SPLIT_CASES, before a ByteLevel
                                                without regex: patterns that match the empty string, literals
  chat TOKENIZER_DIR CASES_JSON OUT_JSON        transformers' apply_chat_template (tokenize=False) of each case
                                                {"messages", "add_generation_prompt", "enable_thinking"}
  set-template TOKENIZER_DIR NAME               writes tokenizer_config.json with a chat template: llama3
                                                (Llama-3's) or qwen25 (Qwen2.5's, without its tools branch)
"""
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def texts(corpus):
    with open(corpus, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def encode(tokenizer_json, corpus, out):
    tok = Tokenizer.from_file(tokenizer_json)
    rows = []
    for t in texts(corpus):
        ids = tok.encode(t, add_special_tokens=False).ids
        rows.append({"ids": ids, "ids_with_special": tok.encode(t, add_special_tokens=True).ids,
                     "decoded": tok.decode(ids, skip_special_tokens=False),
                     "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False)


def train(corpus, out_dir, pre_tokenizer, specials, extra_words, ignore_merges, bos=None):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=1, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts(corpus) * 3, trainer=trainer)
    if bos:  # Llama-3 puts <|begin_of_text|> before every sequence
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                           special_tokens=[(bos, tok.token_to_id(bos))])
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    if extra_words:  # whole words no merge reaches: only ignore_merges can produce them
        j = json.load(open(path, encoding="utf-8"))
        vocab = j["model"]["vocab"]
        next_id = max(max(vocab.values()), max(a["id"] for a in j["added_tokens"])) + 1
        for w in extra_words:
            if w not in vocab:
                vocab[w] = next_id
                next_id += 1
        json.dump(j, open(path, "w", encoding="utf-8"), ensure_ascii=False)
    Tokenizer.from_file(path)  # still loads


LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if (message.role == "
    "\"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\") %}\n        "
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- endif %}\n"
    "{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n")


# Split pre-tokenizers whose patterns match the empty string ("" splits into characters; "x*" and "a|" match
# empty between the non-empty matches; a lookahead is empty only), and literal ("String") patterns, one of them a
# regex metacharacter.
SPLIT_PATTERNS = {"empty": tokenizers.Regex(""), "star": tokenizers.Regex("s*"), "or_empty": tokenizers.Regex("e|"),
                  "lookahead": tokenizers.Regex("(?=o)"), "space": " ", "two_spaces": "  ", "dot": ".",
                  "space_regex": tokenizers.Regex(" ")}
SPLIT_BEHAVIORS = ["isolated", "removed", "merged_with_previous", "merged_with_next"]


def split_cases(corpus, out_dir):
    base = os.path.join(out_dir, "base")
    train(corpus, base, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False), ["<|endoftext|>"], [],
          ignore_merges=False)
    for pattern_name, pattern in SPLIT_PATTERNS.items():
        for behavior in SPLIT_BEHAVIORS:
            tok = Tokenizer.from_file(os.path.join(base, "tokenizer.json"))
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(pattern, behavior=behavior, invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            case_dir = os.path.join(out_dir, pattern_name + "-" + behavior)
            os.makedirs(case_dir, exist_ok=True)
            tok.save(os.path.join(case_dir, "tokenizer.json"))
            encode(os.path.join(case_dir, "tokenizer.json"), corpus, os.path.join(case_dir, "reference.json"))


def set_template(tokenizer_dir, name):
    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    specials = {t.content for t in tok.get_added_tokens_decoder().values()}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False,
              "chat_template": LLAMA3_TEMPLATE if name == "llama3" else QWEN25_TEMPLATE}
    if name == "llama3":
        config.update(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    else:
        config.update(bos_token=None, eos_token=sorted(specials)[0])
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)


def chat(tokenizer_dir, cases_path, out):
    import logging
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer
    logging.getLogger("transformers").setLevel(logging.ERROR)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    rows = []
    for c in cases:
        kwargs = {} if c.get("enable_thinking") is None else {"enable_thinking": c["enable_thinking"]}
        if c.get("tools") is not None:
            kwargs["tools"] = c["tools"]
        rows.append(tok.apply_chat_template(c["messages"], tokenize=False,
                                            add_generation_prompt=c["add_generation_prompt"], **kwargs))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False)


def main():
    cmd = sys.argv[1]
    if cmd == "encode":
        encode(*sys.argv[2:5])
    elif cmd == "make-llama3":
        train(sys.argv[2], sys.argv[3],
              pre_tokenizers.Sequence([
                  pre_tokenizers.Split(tokenizers.Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
                  pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]),
              ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
              ["Ġunreachable", "Ġtokenization", "Ġworld!"], ignore_merges=True, bos="<|begin_of_text|>")
    elif cmd == "chat":
        chat(*sys.argv[2:5])
    elif cmd == "set-template":
        set_template(*sys.argv[2:4])
    elif cmd == "make-gpt2":
        train(sys.argv[2], sys.argv[3], pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
              ["<|endoftext|>"], [], ignore_merges=False)
    elif cmd == "split-cases":
        split_cases(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
