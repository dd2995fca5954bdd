// `rlcpp devices`: what this process can run on — the CPU, and CUDA's runtime, driver and devices (the first
// thing scripts/device_check.sh asks a GPU machine). Exits 1 when --require-gpu is given and no GPU is usable.
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "apps/commands.h"
#include "core/exec_context.h"

namespace rlcpp::cli {

namespace {

// /proc/cpuinfo's model name ("" where there is none).
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "";
}

}  // namespace

Command add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "the CPU and the CUDA runtime, driver and GPUs this process can use");
  auto require_gpu = std::make_shared<bool>(false);
  cmd->add_flag("--require-gpu", *require_gpu, "exit 1 when no CUDA device is usable");
  return {cmd, [=]() {
    const std::string model = cpu_model();
    std::printf("cpu: %s, %u hardware threads\n", model.empty() ? "(model unknown)" : model.c_str(),
                std::thread::hardware_concurrency());
    std::fputs(ExecContext::describe_cuda().c_str(), stdout);
    std::string why;
    const int gpus = ExecContext::cuda_devices(&why);
    if (*require_gpu && gpus == 0) {
      std::fprintf(stderr, "rlcpp: error: devices --require-gpu: %s\n", why.c_str());
      return 1;
    }
    return 0;
  }};
}

}  // namespace rlcpp::cli
