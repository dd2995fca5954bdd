#include "loop/train_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/config.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "model/finite_weights.h"
#include "model/safetensors.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

Json rng_json(const PhiloxStream& rng) { return {{"index", rng.index()}, {"buffered", rng.buffered()}}; }

// A stream index past 2^48 blocks (10^15 draws of 4 words: years of steps) is no state a run left: an edited or
// corrupt state.json, which would silently change every later draw.
constexpr uint64_t kMaxRngIndex = uint64_t{1} << 48;

void restore_rng(const Json& j, PhiloxStream& rng, const std::string& where) {
  RLCPP_CHECK(j.is_object() && j.contains("index") && j.contains("buffered") && j["index"].is_number_unsigned() &&
                  j["buffered"].is_number_integer(),
              where << ": expected {\"index\": a non-negative integer, \"buffered\": an integer}, got " << j.dump());
  RLCPP_CHECK(j["index"].get<uint64_t>() <= kMaxRngIndex,
              where << ": index " << j["index"].get<uint64_t>() << " is past 2^48, more than any run draws (an edited "
                    << "or corrupt state.json)");
  rng.restore(j["index"].get<uint64_t>(), j["buffered"].get<int>());
}

// A moment from the file into the optimizer (on its device) after checking it; second: AdamW's second moment
// (a negative one would make sqrt(v) NaN at the first update).
void load_moment(AdamW& optimizer, bool second, const Tensor& src, const std::string& what) {
  const int64_t expected = second ? optimizer.exp_avg_sq().numel() : optimizer.exp_avg().numel();
  RLCPP_CHECK(src.dtype() == DType::kF32 && src.numel() == expected,
              what << ": " << src.numel() << " values, expected " << expected << " F32");
  const int64_t bad = first_non_finite(src.data<float>(), src.numel());
  RLCPP_CHECK(bad < 0, what << ": holds " << src.data<float>()[bad] << " at element " << bad
                            << ": the optimizer state must be finite");
  if (second) {
    const float* v = src.data<float>();
    for (int64_t i = 0; i < src.numel(); ++i)
      RLCPP_CHECK(v[i] >= 0, what << ": holds " << v[i] << " at element " << i
                                  << ": AdamW's second moment is never negative (a corrupt or edited file)");
  }
  optimizer.set_moment(second, src);
}

// DIR/config.json + model.safetensors + trainer_state.safetensors (the optimizer's moments).
void save_weights_and_moments(const std::string& dir, const ParameterStore& params, AdamW& optimizer,
                              const std::vector<std::string>& extra_files = {}) {
  save_model_checkpoint(dir, params, /*overwrite=*/false, extra_files);
  write_safetensors(dir + "/trainer_state.safetensors",
                    {{"exp_avg", optimizer.moment_on_host(false)}, {"exp_avg_sq", optimizer.moment_on_host(true)}});
}

void load_weights_and_moments(const std::string& dir, ParameterStore& params, AdamW& optimizer) {
  RLCPP_CHECK(fs::exists(dir + "/model.safetensors"), "resume: " << dir << "/model.safetensors is missing");
  const ParameterStore loaded = load_model_checkpoint(dir);
  RLCPP_CHECK(loaded.numel() == params.numel() && loaded.config().value_head == params.config().value_head,
              "resume: " << dir << " holds " << loaded.numel() << " parameters"
                         << (loaded.config().value_head ? " (a critic)" : "") << ", the run's model "
                         << params.numel() << (params.config().value_head ? " (a critic)" : ""));
  std::memcpy(params.flat().data<float>(), loaded.flat().data<float>(), params.flat().nbytes());
  const std::string path = dir + "/trainer_state.safetensors";
  const SafetensorsFile trainer_state = read_safetensors(path);
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    const auto it = trainer_state.tensors.find(name);
    RLCPP_CHECK(it != trainer_state.tensors.end(), "resume: " << path << " has no " << name);
    const bool second_moment = std::string(name) == "exp_avg_sq";
    load_moment(optimizer, second_moment, it->second, path + " " + name);
  }
}

}  // namespace

void save_train_checkpoint(const std::string& dir, const ParameterStore& params, AdamW& optimizer,
                           const TrainState& state, const CriticState* critic,
                           const std::vector<std::string>& extra_files) {
  write_train_checkpoint(dir, params, optimizer, state, critic, extra_files);
  commit_train_checkpoint(dir);
}

void write_train_checkpoint(const std::string& dir, const ParameterStore& params, AdamW& optimizer,
                            const TrainState& state, const CriticState* critic,
                            const std::vector<std::string>& extra_files) {
  const std::string partial = dir + ".partial";
  fs::remove_all(partial);
  try {
    save_weights_and_moments(partial, params, optimizer, extra_files);
    Json j = {{"step", state.step},
              {"policy_version", state.policy_version},
              {"optimizer_steps", optimizer.steps_taken()},
              {"data_rng", rng_json(*state.data_rng)},
              {"update_rng", rng_json(*state.update_rng)}};
    if (!state.run_config.is_null()) j["run_config"] = state.run_config;
    if (critic != nullptr) {
      save_weights_and_moments(partial + "/critic", critic->params, critic->optimizer);
      j["critic_optimizer_steps"] = critic->optimizer.steps_taken();
    }
    if (state.adapters != nullptr) state.adapters->save_peft(partial + "/" + kAdapterDir);
    if (!state.pending_rollouts.is_null())
      write_json_file_atomic(partial + "/" + kPendingRolloutsFile, state.pending_rollouts);
    if (!state.episodes_in_flight.is_null())
      write_json_file_atomic(partial + "/" + kEpisodesInFlightFile, state.episodes_in_flight);
    write_json_file_atomic(partial + "/state.json", j);
  } catch (...) {
    // A full disk: the half-written copy would keep it full. The previous checkpoints are untouched.
    std::error_code ec;
    fs::remove_all(partial, ec);
    throw;
  }
}

void commit_train_checkpoint(const std::string& dir) {
  fs::remove_all(dir);
  fs::rename(dir + ".partial", dir);
}

Json checkpoint_run_config(const std::string& dir) {
  const std::string state_path = dir + "/state.json";
  const Json j = load_json_file(state_path);
  return j.is_object() && j.contains("run_config") ? j["run_config"] : Json();
}

void remove_unfinished_checkpoints(const std::string& run_dir) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".partial") || name.find(".tmp-") != std::string::npos ||
        name.find(".old-") != std::string::npos)
      leftovers.push_back(entry.path());
  }
  for (const fs::path& p : leftovers) {
    fs::remove_all(p, ec);
    std::printf("checkpoints: removed %s, left by an interrupted write\n", p.string().c_str());
  }
}

void prune_checkpoints(const std::string& run_dir, int64_t keep_last, const std::string& pinned) {
  if (keep_last <= 0) return;
  std::error_code ec;
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (const auto& entry : fs::directory_iterator(fs::path(run_dir) / "checkpoints")) {
    const int64_t step = checkpoint_step_of(entry.path().filename().string());
    const bool is_pinned = !pinned.empty() && fs::equivalent(entry.path(), pinned, ec);
    if (step >= 0 && entry.is_directory() && !is_pinned) steps.emplace_back(step, entry.path());
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) fs::remove_all(steps[i].second, ec);
}

void load_train_checkpoint(const std::string& dir, ParameterStore& params, AdamW& optimizer, TrainState& state,
                           const CriticState* critic) {
  const std::string state_path = dir + "/state.json";
  RLCPP_CHECK(fs::exists(state_path), "resume: " << state_path << " is missing (not a train checkpoint)");
  const Json j = load_json_file(state_path);
  load_weights_and_moments(dir, params, optimizer);
  if (state.adapters != nullptr) {
    const std::string adapter_dir = dir + "/" + kAdapterDir;
    RLCPP_CHECK(is_peft_adapter_dir(adapter_dir), "resume: " << adapter_dir << " is missing: the run trains LoRA "
                                                             << "adapters (trainer.lora.rank > 0) but the checkpoint "
                                                             << "holds none");
    const LoraAdapters saved = LoraAdapters::load_peft(adapter_dir, params.config());
    RLCPP_CHECK(saved.config().same_adapters(state.adapters->config()),
                "resume: " << adapter_dir << " holds adapters of another trainer.lora (rank " << saved.config().rank
                           << ", alpha " << saved.config().alpha << ") than the run's (rank "
                           << state.adapters->config().rank << ", alpha " << state.adapters->config().alpha << ")");
    ExecContext::cpu().copy(saved.weights().flat(), state.adapters->weights().flat());
  }
  if (critic != nullptr) {
    RLCPP_CHECK(fs::exists(dir + "/critic"), "resume: " << dir << "/critic is missing: the run trains a critic "
                                                        << "(algorithm.name \"ppo\") but the checkpoint has none");
    load_weights_and_moments(dir + "/critic", critic->params, critic->optimizer);
  }
  try {
    optimizer.set_steps_taken(j.at("optimizer_steps").get<int64_t>());
    if (critic != nullptr) critic->optimizer.set_steps_taken(j.at("critic_optimizer_steps").get<int64_t>());
    state.step = j.at("step").get<int64_t>();
    state.policy_version = j.at("policy_version").get<int64_t>();
    // A state.json edited or copied from elsewhere must not replay or skip steps over saved checkpoints.
    fs::path folder = fs::path(dir).lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();
    const int64_t folder_step = checkpoint_step_of(folder.filename().string());
    RLCPP_CHECK(state.step >= 0 && (folder_step < 0 || state.step == folder_step),
                "resume: " << state_path << ": step " << state.step << " does not match its checkpoint folder "
                           << folder.filename().string() << " (the checkpoint of step N is step_N)");
    RLCPP_CHECK(state.policy_version >= 0 && optimizer.steps_taken() >= 0,
                "resume: " << state_path << ": policy_version " << state.policy_version << " and optimizer_steps "
                           << optimizer.steps_taken() << " must be >= 0");
    restore_rng(j.at("data_rng"), *state.data_rng, state_path + " data_rng");
    restore_rng(j.at("update_rng"), *state.update_rng, state_path + " update_rng");
    const std::string pending = dir + "/" + kPendingRolloutsFile;
    state.pending_rollouts = fs::exists(pending) ? load_json_file(pending, kCheckpointStateInput) : Json();
    const std::string in_flight = dir + "/" + kEpisodesInFlightFile;
    state.episodes_in_flight = fs::exists(in_flight) ? load_json_file(in_flight, kCheckpointStateInput) : Json();
  } catch (const Json::exception& e) {
    RLCPP_FAIL("resume: " << state_path << ": " << e.what());
  }
}

std::string reference_checkpoint_dir(const std::string& run_dir) { return run_dir + "/checkpoints/reference"; }

void save_reference_checkpoint(const std::string& run_dir, const ParameterStore& reference) {
  save_model_checkpoint(reference_checkpoint_dir(run_dir), reference);
}

ParameterStore load_reference_checkpoint(const std::string& run_dir) {
  const std::string dir = reference_checkpoint_dir(run_dir);
  RLCPP_CHECK(fs::exists(dir + "/model.safetensors"),
              "resume: " << dir << " is missing: the run's KL term (algorithm.policy_loss.kl_coef > 0), DPO or "
                         << "LoRA (trainer.lora.rank > 0, its frozen base) needs the frozen reference policy saved "
                         << "there at the start of the run");
  return load_model_checkpoint(dir);
}

}  // namespace rlcpp
