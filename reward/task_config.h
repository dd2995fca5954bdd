// The `task` section of a run config: which task, its size, seeds, scorer and the tokenizer's charset.
#pragma once

#include <cstdint>
#include <string>

namespace rlcpp {

// The character tokenizer's text alphabet (ids 3..20 after PAD, BOS, EOS).
inline constexpr const char* kCharTokenizerCharset = "0123456789+-*= ()/";

struct TaskConfig {
  std::string name = "add3";
  int64_t digits = 3;
  int64_t seed = 1;
  int64_t eval_seed = 20240917;
  int64_t eval_size = 1000;
  std::string operands = "uniform";
  std::string path;
  std::string test_path;
  std::string scorer = "format";
  double format_score = 0.1;
  double tolerance = 0.0;
  std::string charset = kCharTokenizerCharset;

  template <class V> void visit(V& v) {
    v("name", name,
      "task: add3 (add with 3 digits), add, sub, mul (with task.digits), countdown, countdown_words (English "
      "prompt, expression after ####), words (generated word problems, answer after ####), guess (a hidden "
      "number in [0, 999], for agent.env \"guess\"), dataset; countdown_words and words are free text and "
      "need task.charset \"\" and a tokenizer.json checkpoint");
    v("digits", digits, "add/sub/mul: digits per operand, operands uniform in [0, 10^digits - 1] (1..9)");
    v("operands", operands,
      "add3/add/sub/mul training draws: \"uniform\" (the task's own) or \"length-balanced\" (each operand's "
      "digit count uniform, then its value; the held-out set stays uniform)");
    v("seed", seed, "seed of the training problem stream");
    v("eval_seed", eval_seed, "seed of the fixed held-out eval set (keep it fixed to compare runs)");
    v("eval_size", eval_size, "number of held-out eval problems (fewer if the test split is smaller)");
    v("path", path, "dataset: JSONL file, one {\"prompt\": ..., \"answer\": ...} per line");
    v("test_path", test_path,
      "dataset: optional JSONL test file; when empty, a hash of the prompt selects about 10% of `path` as test");
    v("scorer", scorer,
      "format (1 correct, format_score well-formed integer, 0 else) | exact (1 or 0) | numeric (1 within "
      "tolerance, 0 else) | math (final answer after ####, in \\boxed{} or the last number: 1 correct, "
      "format_score a ####/boxed answer that is wrong, 0 else); countdown takes format or exact, words math "
      "(format means math) or exact");
    v("format_score", format_score, "reward of a well-formed but wrong answer under the format and math scorers");
    v("tolerance", tolerance, "numeric scorer: absolute tolerance (0 compares decimal values exactly)");
    v("charset", charset,
      "characters the tokenizer can encode; prompts and answers are checked against it (empty: no check, any "
      "text: what the text tasks words and countdown_words and text datasets need, with a tokenizer.json)");
  }
};

}  // namespace rlcpp
