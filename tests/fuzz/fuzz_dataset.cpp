// libFuzzer target: a dataset JSONL file (reward/dataset_task.h), every line checked as `task.name = dataset`
// loads it.
#include "reward/dataset_task.h"
#include "reward/task_config.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = rlcpp::fuzz::input_file(data, size, "dataset.jsonl");
  rlcpp::fuzz::expect_only_errors(
      [&] { rlcpp::load_jsonl_problems(path, rlcpp::kCharTokenizerCharset, rlcpp::ScorerSpec{}); });
  return 0;
}
