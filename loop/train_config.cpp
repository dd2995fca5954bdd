#include "loop/train_config.h"

#include <filesystem>
#include <map>

#include "core/curve.h"
#include "core/endpoint.h"
#include "core/error.h"
#include "core/exec_context.h"
#include "loop/evaluation.h"
#include "tokenizer/hf_tokenizer.h"
#include "model/model_config.h"
#include "reward/task_registry.h"
#include "rollout/request_wire.h"
#include "rollout/serve_request.h"
#include "trainer/algorithm.h"

namespace rlcpp {

TrainConfig::TrainConfig() {
  rollout.sampling.temperature = 1.0f;
  rollout.sampling.max_new_tokens = 6;
  ppo.epochs = 1;
  ppo.mini_batch_size = 32 * 8;  // two mini-batches of 32 groups of 8
  ppo.micro_batch_size = 128;
  ppo.shuffle = false;  // whole groups stay together in a mini-batch
  optim.lr = 1e-4;
  optim.beta1 = 0.9;
  optim.beta2 = 0.95;
  optim.weight_decay = 0.0;
  optim.grad_clip = 1.0;
  warm_start.sft.run_dir = "";  // placed under run_dir
  warm_start.sft.optim.lr = 1e-3;
}

CriticSection::CriticSection() {
  optim.lr = 5e-4;
  optim.beta1 = 0.9;
  optim.beta2 = 0.95;
  optim.weight_decay = 0.0;
  optim.grad_clip = 1.0;
}

void config_from_json(const Json& j, TrainConfig& cfg) {
  if (j.is_object() && j.contains("algorithm") && j["algorithm"].is_object() && j["algorithm"].contains("name")) {
    const std::string name = config_detail::read_leaf<std::string>(j["algorithm"]["name"], "algorithm.name");
    find_algorithm(name);  // names the key and the registered algorithms
    cfg.algorithm = algorithm_defaults(name);
  }
  config_detail::Reader reader(j, "");
  cfg.visit(reader);
  reader.check_no_unknown();
}

int64_t TrainConfig::harness_sessions_at_once() const {
  // The draws an episode may span: those its turns may be held for, and those its tokens may be kept for.
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t draws = 1;
  if (agent.turns_per_draw > 0) draws += ceil_div(agent.max_turns, agent.turns_per_draw) - 1;
  if (agent.tokens_per_draw > 0) draws += ceil_div(agent.max_turns * agent.max_turn_tokens, agent.tokens_per_draw);
  return rollout.prompts_per_step * rollout.group_size * draws;
}

int64_t TrainConfig::update_batch_size() const {
  const int64_t groups =
      filter_groups.enabled && filter_groups.max_groups > 0 ? filter_groups.max_groups : rollout.prompts_per_step;
  return groups * rollout.group_size;
}

void TrainConfig::check_data_parallel(int ranks) const {
  RLCPP_CHECK(ranks == 1 || trainer.grad_shards <= 1 || trainer.grad_shards == ranks,
              "config key 'trainer.grad_shards': " << trainer.grad_shards << " shards on " << ranks
                  << " data-parallel ranks; ordered sums take one shard a rank (set it to " << ranks << ", or 0)");
  if (ranks == 1) return;
  const int64_t mini = ppo.mini_batch_size > 0 ? ppo.mini_batch_size : update_batch_size();
  const int64_t micro_batches = (mini + ppo.micro_batch_size - 1) / ppo.micro_batch_size;
  RLCPP_CHECK(micro_batches >= ranks,
              "config key 'ppo.micro_batch_size': " << ranks << " data-parallel ranks share each mini-batch's "
                  << "micro-batches, but a mini-batch of " << mini << " sequences makes " << micro_batches
                  << " micro-batch(es) of " << ppo.micro_batch_size << "; set ppo.micro_batch_size <= "
                  << mini / ranks);
}

int64_t TrainConfig::run_optimizer_steps() const {
  const int64_t batch_size = update_batch_size();
  const int64_t mini = ppo.mini_batch_size > 0 ? ppo.mini_batch_size : batch_size;
  return steps * ppo.epochs * ((batch_size + mini - 1) / mini);
}

ModelNumerics TrainConfig::rollout_numerics() const {
  return make_numerics(rollout.dtype, rollout.quantization, numerics.batch_invariant, "rollout.dtype",
                       "rollout.quantization");
}

ModelNumerics TrainConfig::trainer_numerics() const {
  // Whether the training forward then runs through the packed kernel is its executor's choice (model/executor.h:
  // always on the CPU, where it is also the fastest; on a GPU when batch-invariant, else cuBLAS).
  return make_numerics(trainer.dtype, "none", numerics.batch_invariant, "trainer.dtype", "trainer.quantization");
}

void TrainConfig::check_numerics_devices() const {
  check_numerics_device(trainer_numerics(), parse_device_spec(device, "config key 'device'").device, "trainer.dtype",
                        "numerics.batch_invariant");
  if (rollout.placement != "remote")
    check_numerics_device(rollout_numerics(), parse_device_spec(rollout_device(), "config key 'rollout.device'").device,
                          "rollout.dtype", "numerics.batch_invariant");
}

namespace {

// The model config of the checkpoint directory a config key names; the error names the key.
ModelConfig checkpoint_model_config(const std::string& dir, const char* key) {
  RLCPP_CHECK(std::filesystem::is_directory(dir),
              "config key '" << key << "': '" << dir << "' is not a checkpoint directory (it does not exist or is "
                             << "not a directory)");
  const std::string path = dir + "/config.json";
  return model_config_from_hf_json(load_json_file(path), path);
}

}  // namespace

ModelConfig TrainConfig::policy_model_config() const {
  const auto of_checkpoint = checkpoint_model_config;
  if (!init_checkpoint.empty()) return of_checkpoint(init_checkpoint, "init_checkpoint");
  if (!warm_start.enabled) return rlcpp::model_preset(model_preset);
  const SftConfig& sft = warm_start.sft;
  return sft.init_checkpoint.empty() ? rlcpp::model_preset(sft.model_preset)
                                     : of_checkpoint(sft.init_checkpoint, "warm_start.sft.init_checkpoint");
}

std::string TrainConfig::tokenizer_path() const {
  if (!init_checkpoint.empty() || !warm_start.enabled) return choose_tokenizer(tokenizer, init_checkpoint);
  return choose_tokenizer(tokenizer, choose_tokenizer(warm_start.sft.tokenizer, warm_start.sft.init_checkpoint));
}

namespace {

// rollout.weight_sync: zmq anywhere; cuda-ipc between a trainer and split workers on this host's GPUs; nccl to
// split workers each on a GPU of its own, none the trainer's.
void validate_weight_sync(const TrainConfig& c) {
  const std::string& w = c.rollout.weight_sync;
  RLCPP_CHECK(w == "zmq" || w == "cuda-ipc" || w == "nccl",
              "config key 'rollout.weight_sync': \"" << w << "\", expected \"zmq\", \"cuda-ipc\" or \"nccl\"");
  if (w == "zmq") return;
  RLCPP_CHECK(c.rollout.placement == "split",
              "config key 'rollout.weight_sync': " << w << " feeds split workers, but rollout.placement is \""
                                                   << c.rollout.placement
                                                   << "\" (colocated needs no copy; remote workers take zmq)");
  const DeviceSpec trainer = parse_device_spec(c.device, "config key 'device'");
  const DeviceSpec rollout = parse_device_spec(c.rollout_device(), "config key 'rollout.device'");
  RLCPP_CHECK(trainer.is_gpu() && rollout.is_gpu(),
              "config key 'rollout.weight_sync': " << w << " copies GPU to GPU, but the trainer runs on '" << c.device
                                                   << "' and the workers on '" << c.rollout_device()
                                                   << "' (set device = cuda, or use zmq)");
  if (w != "nccl") return;
  const int64_t first = rollout.index, last = rollout.index + c.rollout.num_workers - 1;
  RLCPP_CHECK(trainer.index < first || trainer.index > last,
              "config key 'rollout.weight_sync': nccl puts worker w on cuda:(" << first << " + w), cuda:" << first
                  << "..cuda:" << last << " for " << c.rollout.num_workers
                  << " workers, which holds the trainer's cuda:" << trainer.index
                  << " (two NCCL ranks cannot share a GPU: set rollout.device = cuda:" << trainer.index + 1 << ")");
}

// rollout.remote, when the placement is "remote" (and nothing in it otherwise): the lists agree, every endpoint
// is one a trainer may reach (beyond this machine only with keys), and the key files load.
void validate_remote_workers(const RolloutSection& rollout) {
  const RemoteWorkersSection& r = rollout.remote;
  if (rollout.placement != "remote") {
    RLCPP_CHECK(r.endpoints.empty() && r.weights_endpoints.empty() && r.key.empty() && r.worker_keys.empty() &&
                    r.listen.empty(),
                "config key 'rollout.remote': set, but rollout.placement is \"" << rollout.placement
                                                                               << "\" (remote workers need \"remote\")");
    return;
  }
  const size_t n = r.endpoints.size();
  RLCPP_CHECK(r.listen.empty() || (n == 0 && r.weights_endpoints.empty()),
              "config key 'rollout.remote.listen': give either listen (workers connect to the trainer) or "
              "endpoints and weights_endpoints (the trainer connects to the workers), not both");
  if (!r.listen.empty()) {
    RLCPP_CHECK(r.min_workers >= 1 && r.min_workers <= rollout.prompts_per_step,
                "config key 'rollout.remote.min_workers': must be in [1, rollout.prompts_per_step "
                    << rollout.prompts_per_step << "], got " << r.min_workers);
  } else {
    RLCPP_CHECK(n >= 1, "config key 'rollout.remote.endpoints': the remote placement needs at least one worker "
                        "endpoint (each `rlcpp worker CKPT --bind tcp://HOST:PORT --weights tcp://HOST:PORT2`), or "
                        "rollout.remote.listen for workers that connect");
    RLCPP_CHECK(static_cast<int64_t>(n) <= rollout.prompts_per_step,
                "config key 'rollout.remote.endpoints': " << n << " workers for " << rollout.prompts_per_step
                                                          << " prompts per step (rollout.prompts_per_step)");
    RLCPP_CHECK(r.weights_endpoints.size() == n,
                "config key 'rollout.remote.weights_endpoints': " << r.weights_endpoints.size() << " endpoints for " << n
                                                                  << " workers (one per rollout.remote.endpoints entry)");
    RLCPP_CHECK(r.worker_keys.empty() || r.worker_keys.size() == 1 || r.worker_keys.size() == n,
                "config key 'rollout.remote.worker_keys': " << r.worker_keys.size() << " keys for " << n
                                                            << " workers (one per worker, or one for all)");
  }
  RLCPP_CHECK(r.key.empty() == r.worker_keys.empty(),
              "config keys 'rollout.remote.key' and 'rollout.remote.worker_keys': give both (CURVE: the trainer's "
              "PREFIX.key and the workers' .pub files) or neither");
  // Each place once: one worker listed twice would be sent two shares of every rollout and two copies of every
  // publish (the second refused as "not newer").
  std::map<std::string, std::string> places;  // place -> the entry that named it first
  auto check_endpoint = [&](const std::string& key, size_t i, const std::string& e, EndpointUse use) {
    Endpoint parsed;
    try {
      parsed = parse_endpoint(e, use);
    } catch (const Error& err) {
      RLCPP_FAIL("config key '" << key << "': " << err.what());
    }
    RLCPP_CHECK(parsed.transport != "inproc",
                "config key '" << key << "': '" << e << "' is inproc://, which no other process can reach");
    RLCPP_CHECK(parsed.local || !r.key.empty(),
                "config key '" << key << "': '" << e << "' reaches beyond this machine, which needs CURVE keys: "
                               << "`rlcpp keys PREFIX` on each side, then rollout.remote.key = the trainer's "
                               << "PREFIX.key and rollout.remote.worker_keys = the workers' .pub files");
    const std::string entry = key + "[" + std::to_string(i) + "] '" + e + "'";
    const auto [first, fresh] = places.emplace(parsed.place(), entry);
    RLCPP_CHECK(fresh, "config key '" << key << "': " << entry << " is the place " << first->second
                                      << " already names (" << parsed.place() << "): list each worker once");
  };
  for (size_t i = 0; i < r.endpoints.size(); ++i)
    check_endpoint("rollout.remote.endpoints", i, r.endpoints[i], EndpointUse::kConnect);
  for (size_t i = 0; i < r.weights_endpoints.size(); ++i)
    check_endpoint("rollout.remote.weights_endpoints", i, r.weights_endpoints[i], EndpointUse::kConnect);
  if (!r.listen.empty()) check_endpoint("rollout.remote.listen", 0, r.listen, EndpointUse::kBind);
  if (r.key.empty()) return;
  RLCPP_CHECK(curve_supported(), "config key 'rollout.remote.key': this libzmq was built without CURVE");
  try {
    load_curve_key_file(r.key);
    for (const std::string& file : r.worker_keys) load_curve_public_key(file);
  } catch (const Error& e) {
    RLCPP_FAIL("config key 'rollout.remote': " << e.what());
  }
}

}  // namespace

void TrainConfig::validate() const {
  check_numerics_devices();
  RLCPP_CHECK(rollout.sampling.logprob_space == "full",
              "config key 'rollout.sampling.logprob_space': rlcpp train sets it from algorithm.logprob_space (which "
              "the trainer reads too); set that instead, got \"" << rollout.sampling.logprob_space << "\"");
  // Everything a worker or the engine would reject, before the warm start or the first step runs.
  const ModelConfig policy = policy_model_config();
  rollout.sampling.validate("config key 'rollout.sampling'", policy.vocab_size);
  try {
    validate_engine_config(rollout.engine, policy);
  } catch (const Error& e) {
    throw Error(std::string("config key 'rollout.engine': ") + e.what());
  }
  // The tokenizer loads and fits the model (its errors name the file), and the task's text fits its charset.
  make_task_for(task, *run_tokenizer(tokenizer_path(), tokenizer, policy, chat))
      ->check_fits(engine_model_config(policy, rollout.engine).max_position_embeddings,
                   rollout.sampling.max_new_tokens);
  const RequestLimits limits;
  RLCPP_CHECK(rollout.prompts_per_step <= limits.max_prompts && rollout.group_size <= limits.max_n &&
                  rollout.prompts_per_step * rollout.group_size <= limits.max_sequences,
              "config keys 'rollout.prompts_per_step' and 'rollout.group_size': "
                  << rollout.prompts_per_step << " x " << rollout.group_size << " is past a rollout's limits ("
                  << limits.max_prompts << " prompts, " << limits.max_n << " samples each, " << limits.max_sequences
                  << " sequences)");
  RLCPP_CHECK(mismatch.ratio_bound >= 1, "config key 'mismatch.ratio_bound': must be >= 1, got " << mismatch.ratio_bound);
  RLCPP_CHECK(mismatch.full_vocab_samples >= 0,
              "config key 'mismatch.full_vocab_samples': must be >= 0, got " << mismatch.full_vocab_samples);
  RLCPP_CHECK(rollout.placement == "colocated" || rollout.placement == "split" || rollout.placement == "remote",
              "config key 'rollout.placement': \"" << rollout.placement
                                                    << "\", expected \"split\", \"colocated\" or \"remote\"");
  validate_remote_workers(rollout);
  validate_weight_sync(*this);
  check_device_available(device, "config key 'device'");
  if (rollout.placement != "remote")  // remote workers run where their own --device says
    check_device_available(rollout_device(), rollout.device.empty() ? "config key 'device'" : "config key 'rollout.device'");
  RLCPP_CHECK(rollout.num_workers >= 1 && rollout.num_workers <= rollout.prompts_per_step,
              "config key 'rollout.num_workers': must be in [1, prompts_per_step " << rollout.prompts_per_step
                                                                                  << "], got " << rollout.num_workers);
  // At most a week: the timeouts become milliseconds in a long, which a larger value overflows.
  constexpr double kMaxTimeoutS = 7 * 24 * 3600;
  RLCPP_CHECK(rollout.worker_heartbeat_timeout_s > 0 && rollout.worker_timeout_s > 0 &&
                  rollout.worker_heartbeat_timeout_s <= kMaxTimeoutS && rollout.worker_timeout_s <= kMaxTimeoutS,
              "config keys 'rollout.worker_heartbeat_timeout_s' and 'rollout.worker_timeout_s' must be positive "
              "seconds, at most a week (604800), got " << rollout.worker_heartbeat_timeout_s << " and "
                                                       << rollout.worker_timeout_s);
  RLCPP_CHECK(rollout.chunk_prompts >= 0 && rollout.chunk_prompts <= rollout.prompts_per_step,
              "config key 'rollout.chunk_prompts': must be in [0, rollout.prompts_per_step " << rollout.prompts_per_step
                                                                                              << "], got "
                                                                                              << rollout.chunk_prompts);
  RLCPP_CHECK(rollout.max_worker_restarts >= 0,
              "config key 'rollout.max_worker_restarts': must be >= 0, got " << rollout.max_worker_restarts);
  RLCPP_CHECK(probe.prompts >= 0 && probe.max_abs_dlogp >= 0,
              "config keys 'probe.prompts' and 'probe.max_abs_dlogp' must be >= 0");
  RLCPP_CHECK(rollout.prompts_per_step >= 1 && rollout.group_size >= 1,
              "config keys 'rollout.prompts_per_step' and 'rollout.group_size' must be >= 1, got "
                  << rollout.prompts_per_step << " and " << rollout.group_size);
  const AlgorithmNeeds needs = find_algorithm(algorithm.name).needs(algorithm);
  RLCPP_CHECK(rollout.group_size >= needs.min_group_size,
              "config key 'rollout.group_size': " << algorithm.name << " needs at least " << needs.min_group_size
                                                  << " samples of each prompt (online DPO pairs two of them), got "
                                                  << rollout.group_size);
  RLCPP_CHECK(steps >= 1, "config key 'steps': must be >= 1, got " << steps);
  RLCPP_CHECK(trainer.grad_shards >= 0 && trainer.grad_shards <= 64,
              "config key 'trainer.grad_shards': must be in [0, 64], got " << trainer.grad_shards);
  trainer.lora.validate("trainer.lora.");
  RLCPP_CHECK(rollout.lora_merge || trainer.lora.enabled(),
              "config key 'rollout.lora_merge': false runs a LoRA run's adapters unmerged in the engine, and this "
              "run trains no adapters (trainer.lora.rank is 0)");
  RLCPP_CHECK(rollout.lora_merge ||
                  parse_device_spec(rollout.device.empty() ? device : rollout.device, "config key 'rollout.device'")
                      .is_host(),
              "config key 'rollout.lora_merge': unmerged adapters run in a host engine; rollout.device is '"
                  << (rollout.device.empty() ? device : rollout.device) << "'");
  RLCPP_CHECK(!trainer.lora.enabled() || parse_device_spec(device, "config key 'device'").is_host(),
              "config key 'trainer.lora.rank': LoRA trains on the CPU for now; the trainer's device is '" << device
                                                                                                    << "'");
  RLCPP_CHECK(trainer.collective_timeout_s > 0 && trainer.collective_timeout_s <= kMaxTimeoutS,
              "config key 'trainer.collective_timeout_s': must be positive seconds, at most a week (604800), got "
                  << trainer.collective_timeout_s);
  RLCPP_CHECK(async.max_staleness >= 0 && async.max_staleness <= 64,
              "config key 'async.max_staleness': must be in [0, 64] (each pending step's rollout is held in "
              "memory and in checkpoints), got " << async.max_staleness);
  RLCPP_CHECK(rollout.sampling.seed == 0,
              "config key 'rollout.sampling.seed': rlcpp train draws each step's sampling seed from the run's "
              "'seed'; set that instead (got " << rollout.sampling.seed << ")");
  RLCPP_CHECK(eval_every >= 0 && checkpoint_every >= 0 && checkpoint_keep_last >= 0 && eval_size >= 1 &&
                  samples_per_step >= 0 && log_every >= 1,
              "config keys 'eval_every', 'checkpoint_every', 'checkpoint_keep_last', 'samples_per_step' must be "
              ">= 0, 'eval_size' and "
              "'log_every' >= 1");
  RLCPP_CHECK(!filter_groups.enabled || needs.group_advantages,
              "config key 'filter_groups.enabled': only algorithms with group-relative advantages (grpo, gspo, cispo, "
              "reinforce_pp_baseline) filter groups (algorithm.name is \"" << algorithm.name << "\"; a PPO critic and "
              "REINFORCE++'s batch-whitened returns learn from every group, DPO pairs skip tied groups): set "
              "filter_groups.enabled to false");
  RLCPP_CHECK(filter_groups.max_draws >= 1 && filter_groups.max_draws <= 1000,
              "config key 'filter_groups.max_draws': must be in [1, 1000], got " << filter_groups.max_draws);
  RLCPP_CHECK(filter_groups.max_draws == 1 || (filter_groups.enabled && filter_groups.max_groups > 0),
              "config key 'filter_groups.max_draws': refilling (" << filter_groups.max_draws << " draws) needs "
              "filter_groups.enabled and a filter_groups.max_groups > 0 to fill");
  const int64_t drawable = rollout.prompts_per_step * filter_groups.max_draws;
  RLCPP_CHECK(filter_groups.max_groups >= 0 && filter_groups.max_groups <= drawable,
              "config key 'filter_groups.max_groups': must be in [0, rollout.prompts_per_step x "
              "filter_groups.max_draws = " << drawable << "], got " << filter_groups.max_groups);
  const int64_t batch = update_batch_size();
  RLCPP_CHECK(ppo.mini_batch_size == 0 || ppo.mini_batch_size % rollout.group_size == 0,
              "config key 'ppo.mini_batch_size': " << ppo.mini_batch_size << " must hold whole groups of "
                                                   << rollout.group_size);
  RLCPP_CHECK(ppo.mini_batch_size <= batch, "config key 'ppo.mini_batch_size': " << ppo.mini_batch_size
                                                                                 << " is larger than the rollout "
                                                                                    "batch of "
                                                                                 << batch);
  reward.validate();
  reward.overlong_buffer.validate("reward.overlong_buffer", rollout.sampling.max_new_tokens);
  agent.validate("agent");
  if (agent.enabled()) {
    RLCPP_CHECK(!agent.harness_mode() || harness_sessions_at_once() <= ServeLimits::kMaxConcurrency,
                "config keys 'rollout.prompts_per_step' x 'rollout.group_size'"
                    << (agent.spans_draws() ? " x the draws an episode may span (agent.max_turns, turns_per_draw, "
                                              "max_turn_tokens, tokens_per_draw)" : "")
                    << ": a harness may be playing " << harness_sessions_at_once()
                    << " episodes at once, each holding one of the server's threads; at most " << ServeLimits::kMaxConcurrency);
    RLCPP_CHECK(reward.type == "local" && !reward.overlong_buffer.enabled,
                "config keys 'reward.type' / 'reward.overlong_buffer': an episode's reward is its environment's "
                "return (agent.env \"" << agent.env << "\"); leave reward.type \"local\" and the overlong buffer off");
    const int64_t context = engine_model_config(policy, rollout.engine).max_position_embeddings;
    RLCPP_CHECK(agent.max_tokens <= context,
                "config key 'agent.max_tokens': " << agent.max_tokens << " is past the engine's context " << context
                                                  << " (rollout.engine.max_context or the model's)");
    RLCPP_CHECK(agent.env != "remote" || !warm_start.enabled,
                "config keys 'agent.env' / 'warm_start.enabled': a remote environment has no in-process expert to "
                "write the SFT warm start's demonstrations; set warm_start.enabled false and start from "
                "init_checkpoint (e.g. an agent_guess run's checkpoint)");
    RLCPP_CHECK(agent.tokenization == "tito" || !tokenizer_path().empty(),
                "config key 'agent.tokenization': \"retokenize\" re-renders conversations with a chat template, which "
                "the character tokenizer has not (it needs a tokenizer.json with Qwen3's template)");
  }
  algorithm.validate("algorithm");
  if (needs.teacher_logp) {  // the teacher scores the student's tokens: the same vocabulary, room for them
    RLCPP_CHECK(!algorithm.distill.teacher.empty(),
                "config key 'algorithm.distill.teacher': give the teacher's checkpoint directory (e.g. an SFT run's "
                "last checkpoint: runs/sft_add3/checkpoints/step_3000)");
    RLCPP_CHECK(std::filesystem::is_directory(algorithm.distill.teacher),
                "config key 'algorithm.distill.teacher': '" << algorithm.distill.teacher << "' is not a checkpoint "
                    << "directory; train the teacher first (configs/distill_add3.json's: `rlcpp sft "
                    << "configs/sft_add3.json`, about 3 minutes)");
    const ModelConfig teacher = checkpoint_model_config(algorithm.distill.teacher, "algorithm.distill.teacher");
    RLCPP_CHECK(!teacher.value_head && teacher.vocab_size == policy.vocab_size &&
                    teacher.max_position_embeddings >= policy.max_position_embeddings,
                "config key 'algorithm.distill.teacher': " << algorithm.distill.teacher << " is "
                    << (teacher.value_head ? "a critic (value head)" : "a model of vocab_size " +
                        std::to_string(teacher.vocab_size) + " and context " +
                        std::to_string(teacher.max_position_embeddings))
                    << "; the student has vocab_size " << policy.vocab_size << " and context "
                    << policy.max_position_embeddings << " (the teacher needs the same vocabulary and at least "
                    << "that context)");
  }
  ppo.validate("ppo");
  optim.validate();
  if (needs.critic) {
    try {
      critic.optim.validate();
    } catch (const Error& e) {  // OptimConfig names its keys 'optim.*'; these are 'critic.optim.*'
      std::string what = e.what();
      const size_t at = what.find("'optim.");
      throw Error(at == std::string::npos ? "critic: " + what : what.insert(at + 1, "critic."));
    }
  }
  if (warm_start.enabled && init_checkpoint.empty()) warm_start.sft.validate();
}

}  // namespace rlcpp
