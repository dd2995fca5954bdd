"""Hugging Face `tokenizers` as the reference for rlcpp's BPE tokenizer (tests/model_bpe_tokenizer_test.cpp).

  encode TOKENIZER_JSON CORPUS_JSONL OUT_JSON   ids, decode and decode(skip_special) of every {"text"} line
  make-llama3 CORPUS_JSONL OUT_DIR              a Llama-3-style tokenizer.json: Llama-3's split regex, ByteLevel
                                                without its regex, ignore_merges, with whole words in the
                                                vocabulary that no merge reaches (so ignore_merges matters)
  make-gpt2 CORPUS_JSONL OUT_DIR                GPT-2 style: ByteLevel with its own regex and add_prefix_space
"""
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

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
        rows.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                     "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False)


def train(corpus, out_dir, pre_tokenizer, specials, extra_words, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=1, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts(corpus) * 3, trainer=trainer)
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
              ["Ġunreachable", "Ġtokenization", "Ġworld!"], ignore_merges=True)
    elif cmd == "make-gpt2":
        train(sys.argv[2], sys.argv[3], pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
              ["<|endoftext|>"], [], ignore_merges=False)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
