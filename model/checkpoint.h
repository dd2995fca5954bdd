// Model checkpoints in the Hugging Face layout, so `AutoModelForCausalLM.from_pretrained(DIR)` opens what we
// write and we open what it writes:
//   DIR/config.json          model_config_to_hf_json
//   DIR/model.safetensors    every parameter of parameter_layout, F32, metadata {"format": "pt"}
// Loading also accepts DIR/model.safetensors.index.json ({"weight_map": {tensor: shard file}}) for sharded
// checkpoints, and BF16/F16 tensors (converted to fp32).
#pragma once

#include <string>
#include <vector>

#include "model/parameters.h"

namespace rlcpp {

// Writes into DIR.tmp-XXXXXX and renames it to DIR, so DIR is either absent, the old checkpoint or the
// complete new one. An existing DIR is an error unless `overwrite`; then the old one is renamed away, the
// new one renamed in, and the old one deleted. A failed save leaves DIR as it was and no temporary behind.
// Weights holding a NaN or an infinity are refused before anything is written, naming the tensor.
// `extra_files` are copied in beside the weights (a tokenizer's tokenizer.json and tokenizer_config.json).
// `dtype` F32 (the default: training resumes from exactly these weights), or BF16 / F16 (rounded to nearest
// even; config.json's torch_dtype says which) for a smaller checkpoint to share (`rlcpp export`).
void save_model_checkpoint(const std::string& dir, const ParameterStore& params, bool overwrite = false,
                           const std::vector<std::string>& extra_files = {}, DType dtype = DType::kF32);

// Errors name the file and the tensor: missing or unexpected tensors, shapes that disagree with config.json,
// dtypes other than F32/BF16/F16, a NaN or an infinity among the weights, and everything read_safetensors
// rejects.
ParameterStore load_model_checkpoint(const std::string& dir);

// N of a checkpoint folder named step_N, N in decimal digits only; -1 for any other name: step_x, step_-1,
// step_+5, step_12.partial, and a number past int64 (step_99999999999999999999) are not step checkpoints.
int64_t checkpoint_step_of(const std::string& name);

// The newest complete checkpoint among DIR/step_N/ (config.json and model.safetensors present; a step_N.tmp-*
// or step_N.partial of an unfinished write is not one), or "" when there is none or DIR does not exist.
std::string latest_step_checkpoint(const std::string& dir);

}  // namespace rlcpp
