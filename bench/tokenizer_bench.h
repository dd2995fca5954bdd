// `rlcpp bench tokenize`: encode throughput of rlcpp's byte-level BPE on one thread, next to Hugging Face
// `tokenizers` (bench/peers/tokenizers_peer.py in .venv) on the same lines, after checking both give the same ids.
#pragma once

#include <string>
#include <vector>

namespace rlcpp::bench {

struct TokenizerBenchOptions {
  std::string tokenizer;  // a tokenizer.json or a checkpoint directory holding one
  // Text files, encoded line by line (each one's characters and bytes per token printed); default: the
  // project's READMEs, docs, corpus and code.
  std::vector<std::string> inputs;
  int iters = 5;
  bool peer = true;
};

int run_tokenizer_bench(const TokenizerBenchOptions& options);

}  // namespace rlcpp::bench
