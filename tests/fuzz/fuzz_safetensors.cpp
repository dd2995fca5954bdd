// libFuzzer target: a safetensors file (model/safetensors.h), header and buffer.
#include "model/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = rlcpp::fuzz::input_file(data, size, "model.safetensors");
  rlcpp::fuzz::expect_only_errors([&] { rlcpp::read_safetensors(path); });
  return 0;
}
