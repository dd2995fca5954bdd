// `rlcpp export`: a checkpoint rewritten as a Hugging Face directory in bf16 or fp16 (or fp32), with its
// tokenizer files, for sharing and for other tools; training checkpoints stay fp32 so that a run resumes exactly.
// --merge-lora folds a PEFT LoRA adapter (rlcpp's or peft's) into the weights first (model/lora.h).
#include <cstdio>
#include <filesystem>

#include "apps/commands.h"
#include "apps/output_path.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "model/lora.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp::cli {

Command add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "a checkpoint as a Hugging Face directory in bf16, fp16 or fp32");
  struct Args {
    std::string checkpoint, out, dtype = "bf16", tokenizer, lora;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory")->required();
  cmd->add_option("out", a->out, "the directory to write (must not exist)")->required();
  cmd->add_option("--dtype", a->dtype, "bf16, fp16 or fp32 (weights rounded to nearest even)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  cmd->add_option("--tokenizer", a->tokenizer,
                  "tokenizer files to copy in (default: the checkpoint's tokenizer.json and tokenizer_config.json)");
  cmd->add_option("--merge-lora", a->lora,
                  "a PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) trained on this "
                  "checkpoint: written merged into its weights (W + alpha/r * B A)");
  return {cmd, [=]() {
    // An existing `out` is refused by the save ("already exists"); a new one must not lie inside an input.
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(a->out, ec))) {
      std::vector<std::string> inputs = tokenizer_inputs(a->tokenizer);
      inputs.push_back(a->checkpoint);
      if (!a->lora.empty()) inputs.push_back(a->lora);
      check_output_is_outside_inputs(a->out, inputs, "export OUT");
    }
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    std::string merged_text;
    if (!a->lora.empty()) {
      const LoraAdapters adapters = LoraAdapters::load_peft(a->lora, params.config());
      const ParameterStore base = params.clone();
      adapters.merge(ExecContext::cpu(), base, params);
      merged_text = ", LoRA rank " + std::to_string(adapters.config().rank) + " from " + a->lora + " merged";
    }
    DType dtype = DType::kF32;
    parse_precision(a->dtype, &dtype);  // one of --dtype's members
    const std::unique_ptr<Tokenizer> tok = load_tokenizer(choose_tokenizer(a->tokenizer, a->checkpoint), params.config());
    save_model_checkpoint(a->out, params, /*overwrite=*/false, tokenizer_files(*tok), dtype);
    std::printf("export: %s -> %s (%s, %lld parameters%s%s)\n", a->checkpoint.c_str(), a->out.c_str(),
                a->dtype.c_str(), static_cast<long long>(params.numel()), merged_text.c_str(),
                tokenizer_files(*tok).empty() ? "" : ", with its tokenizer");
    return 0;
  }};
}

}  // namespace rlcpp::cli
