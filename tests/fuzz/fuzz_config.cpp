// libFuzzer target: a train config file and --set overrides (core/config.h, loop/train_config.h): the input up
// to the first NUL byte is the config JSON, each later NUL-separated part one "key.path=value" override; the
// config is read into a TrainConfig and validated as `rlcpp train` does before any work.
#include "core/config.h"
#include "loop/train_config.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = rlcpp::fuzz::split_at_nul(data, size);
  const std::string path = rlcpp::fuzz::input_file(reinterpret_cast<const uint8_t*>(parts[0].data()),
                                                   parts[0].size(), "config.json");
  rlcpp::fuzz::expect_only_errors([&] {
    rlcpp::Json j = rlcpp::load_json_file(path);
    for (size_t i = 1; i < parts.size(); ++i) rlcpp::apply_override(j, parts[i]);
    rlcpp::TrainConfig cfg;
    rlcpp::config_from_json(j, cfg);
    cfg.validate();
  });
  return 0;
}
