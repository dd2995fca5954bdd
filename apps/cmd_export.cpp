// `rlcpp export`: a checkpoint rewritten as a Hugging Face directory in bf16 or fp16 (or fp32), with its
// tokenizer files, for sharing and for other tools; training checkpoints stay fp32 so that a run resumes exactly.
#include <cstdio>
#include <filesystem>

#include "apps/commands.h"
#include "apps/output_path.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp::cli {

Command add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "a checkpoint as a Hugging Face directory in bf16, fp16 or fp32");
  struct Args {
    std::string checkpoint, out, dtype = "bf16", tokenizer;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory")->required();
  cmd->add_option("out", a->out, "the directory to write (must not exist)")->required();
  cmd->add_option("--dtype", a->dtype, "bf16, fp16 or fp32 (weights rounded to nearest even)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  cmd->add_option("--tokenizer", a->tokenizer,
                  "tokenizer files to copy in (default: the checkpoint's tokenizer.json and tokenizer_config.json)");
  return {cmd, [=]() {
    // An existing `out` is refused by the save ("already exists"); a new one must not lie inside an input.
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(a->out, ec))) {
      std::vector<std::string> inputs = tokenizer_inputs(a->tokenizer);
      inputs.push_back(a->checkpoint);
      check_output_is_outside_inputs(a->out, inputs, "export OUT");
    }
    const ParameterStore params = load_model_checkpoint(a->checkpoint);
    DType dtype = DType::kF32;
    parse_precision(a->dtype, &dtype);  // one of --dtype's members
    const std::unique_ptr<Tokenizer> tok = load_tokenizer(choose_tokenizer(a->tokenizer, a->checkpoint), params.config());
    save_model_checkpoint(a->out, params, /*overwrite=*/false, tokenizer_files(*tok), dtype);
    std::printf("export: %s -> %s (%s, %lld parameters%s)\n", a->checkpoint.c_str(), a->out.c_str(), a->dtype.c_str(),
                static_cast<long long>(params.numel()), tokenizer_files(*tok).empty() ? "" : ", with its tokenizer");
    return 0;
  }};
}

}  // namespace rlcpp::cli
