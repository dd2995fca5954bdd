#include "rollout/engine.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/metrics.h"
#include "core/parallel_errors.h"
#include "kernels/ops.h"

namespace rlcpp {

namespace {

// Rows x vocabulary below which sampling stays on one thread (a parallel region costs more than it saves).
constexpr int64_t kParallelSampleWork = int64_t{1} << 16;

int64_t resolve_num_blocks(const EngineConfig& c, const ModelConfig& m, DType kv_dtype) {
  const int64_t per_seq = (m.max_position_embeddings + c.block_size - 1) / c.block_size;
  if (c.num_blocks > 0) {
    RLCPP_CHECK(c.num_blocks >= per_seq, "engine config: num_blocks " << c.num_blocks << " cannot hold one sequence of "
                                                                       << m.max_position_embeddings << " tokens, the "
                                                                       << "context (" << per_seq << " blocks of "
                                                                       << c.block_size << "; max_context caps it)");
    return c.num_blocks;
  }
  const int64_t block_bytes = c.block_size * m.kv_bytes_per_token(static_cast<int64_t>(dtype_size(kv_dtype)));
  const int64_t cap = std::max<int64_t>(per_seq, (c.max_kv_cache_mib << 20) / block_bytes);
  return std::min(c.max_num_seqs * per_seq, cap);
}

const EngineConfig& validated(const EngineConfig& c, const ModelConfig& m) {
  validate_engine_config(c, m);
  return c;
}

}  // namespace

ModelConfig engine_model_config(const ModelConfig& model, const EngineConfig& config) {
  ModelConfig served = model;
  if (config.max_context > 0)
    served.max_position_embeddings = std::min(model.max_position_embeddings, config.max_context);
  return served;
}

void validate_engine_config(const EngineConfig& c, const ModelConfig& model) {
  RLCPP_CHECK(c.max_context >= 0 && c.max_context <= model.max_position_embeddings,
              "engine config: max_context " << c.max_context << " must be in [0, the model's context "
                                            << model.max_position_embeddings << "] (0 = the model's)");
  const ModelConfig m = engine_model_config(model, c);
  RLCPP_CHECK(c.block_size >= 1 && c.block_size <= (int64_t{1} << 20),
              "engine config: block_size must be in [1, 1048576], got " << c.block_size);
  RLCPP_CHECK(c.num_blocks >= 0, "engine config: num_blocks must be >= 0 (0 = automatic), got " << c.num_blocks);
  RLCPP_CHECK(c.max_kv_cache_mib >= 1 && c.max_kv_cache_mib <= (int64_t{1} << 30),
              "engine config: max_kv_cache_mib must be in [1, 2^30], got " << c.max_kv_cache_mib);
  // One block (at most fp32 entries) must fit the cache's cap: a huge block_size would allocate it regardless.
  const int64_t block_bytes = c.block_size * m.kv_bytes_per_token(4);
  RLCPP_CHECK(block_bytes <= (c.max_kv_cache_mib << 20),
              "engine config: block_size " << c.block_size << " makes one KV-cache block " << block_bytes
                                           << " bytes, more than max_kv_cache_mib " << c.max_kv_cache_mib
                                           << " MiB; use a block of tens of tokens (default 16)");
  RLCPP_CHECK(c.max_num_seqs >= 1, "engine config: max_num_seqs must be >= 1, got " << c.max_num_seqs);
  RLCPP_CHECK(c.max_num_batched_tokens >= m.max_position_embeddings,
              "engine config: max_num_batched_tokens " << c.max_num_batched_tokens << " must be >= the context "
                                                       << m.max_position_embeddings << " so any prefill fits"
                                                       << (c.max_context > 0 ? " (max_context)" : " (the model's; "
                                                           "max_context caps it)"));
}

Engine::Engine(const Transformer& model, const ParameterStore& params, const EngineConfig& config,
               int64_t policy_version, const ExecContext& context)
    : model_(model),
      params_(&params),
      config_(validated(config, model.config())),
      served_(engine_model_config(model.config(), config_)),
      context_(context),
      policy_version_(policy_version),
      // The KV cache holds the compute dtype's storage (tf32: fp32 values).
      cache_(served_, resolve_num_blocks(config_, served_, storage_dtype(model.numerics().compute)),
             config_.block_size, storage_dtype(model.numerics().compute), context_),
      blocks_(cache_.num_blocks, cache_.block_size, config_.prefix_cache) {
  RLCPP_CHECK(params.numel() == model.config().num_parameters(),
              "engine: parameter buffer of " << params.numel() << " floats, the model has "
                                             << model.config().num_parameters());
  RLCPP_CHECK(params.flat().on_host() || context_.holds(params.flat()),
              "engine: the weights are on " << device_name(params.flat().device()) << ", the engine runs on "
                                            << context_.name());
  samplers_.assign(static_cast<size_t>(std::max(1, omp_get_max_threads())), Sampler(model.config().vocab_size));
  blocks_.set_cache_salt(cache_salt());
}

int64_t Engine::kv_bytes_per_token() const {
  return cache_.num_slots() > 0 ? cache_.bytes() / cache_.num_slots() : 0;
}

void Engine::build_step(const ScheduledBatch& batch, const BlockManager& blocks) {
  CachedStep& s = step_;
  s.tokens.clear();
  s.positions.clear();
  s.query_seq.clear();
  s.slot_mapping.clear();
  s.block_indptr.assign(1, 0);
  s.block_indices.clear();
  s.logits_rows.clear();
  sampled_.clear();
  int32_t b = 0;
  auto add_table = [&](const Sequence& seq) {
    s.block_indices.insert(s.block_indices.end(), seq.block_table.begin(), seq.block_table.end());
    s.block_indptr.push_back(static_cast<int32_t>(s.block_indices.size()));
  };
  auto add_row = [&](const Sequence& seq, int64_t position) {
    s.tokens.push_back(seq.token_at(position));
    s.positions.push_back(static_cast<int32_t>(position));
    s.query_seq.push_back(b);
    s.slot_mapping.push_back(blocks.slot_of(seq, position));
  };
  auto add_jobs = [&](Sequence* seq) {
    SampledRow r;
    r.sequence_id = seq->id();
    r.sequence = seq;
    r.logits_row = static_cast<int32_t>(s.logits_rows.size() - 1);
    r.position = static_cast<int32_t>(seq->num_tokens());
    sampled_.push_back(std::move(r));
  };
  for (const PrefillUnit& unit : batch.prefills) {
    // The unit's sequences share the context and its blocks: the first one stands for all.
    const Sequence& lead = *unit.sequences.front();
    for (int64_t pos = lead.num_cached_tokens; pos < unit.context_tokens; ++pos) add_row(lead, pos);
    add_table(lead);
    s.logits_rows.push_back(static_cast<int32_t>(s.tokens.size() - 1));
    for (Sequence* seq : unit.sequences) add_jobs(seq);
    ++b;
  }
  for (Sequence* seq : batch.decodes) {
    add_row(*seq, seq->num_tokens() - 1);
    add_table(*seq);
    s.logits_rows.push_back(static_cast<int32_t>(s.tokens.size() - 1));
    add_jobs(seq);
    ++b;
  }
}

void Engine::copy_blocks(const std::vector<BlockCopy>& copies) {
  for (const BlockCopy& c : copies) cache_.copy_block(context_, c.src, c.dst, c.num_tokens);
}

Tensor Engine::host_logits(const Tensor& logits) {
  if (logits.on_host()) return logits;
  const int64_t rows = logits.size(0), V = logits.size(1);
  if (!host_logits_.defined() || host_logits_.size(0) < rows) host_logits_ = Tensor::empty({rows, V});
  Tensor view = host_logits_.slice_rows(0, rows);
  context_.copy(logits, view);
  return view;
}

// The sampler's log-probs are the CPU's row_logprob bits, a CPU trainer's; a trainer on the engine's device
// computes them with that device's logprob_forward, one row at a time in an order that does not depend on the
// batch. The sampled tokens are scored with that op on the step's own logits, so that rollout and trainer agree
// bit for bit there too (numerics.batch_invariant). Jobs of one temperature are scored together.
void Engine::rescore_on_device(const Tensor& logits) {
  const int64_t V = model_.config().vocab_size;
  std::map<float, std::vector<size_t>> by_temperature;
  for (size_t j = 0; j < sampled_.size(); ++j) {
    const LogprobScoring scoring = sampled_[j].sequence->sampling->scoring();
    if (!scoring.truncation.active(V)) by_temperature[scoring.temperature].push_back(j);
  }
  for (const auto& [temperature, job_ids] : by_temperature) {
    const int64_t jobs = static_cast<int64_t>(job_ids.size());
    std::vector<int32_t> rows, tokens;
    for (size_t j : job_ids) {
      rows.push_back(sampled_[j].logits_row);
      tokens.push_back(sampled_[j].token);
    }
    Tensor scored = context_.empty({jobs, V}), logp = context_.empty({jobs}), lse = context_.empty({jobs});
    ops::embedding_forward(context_, logits, i32_on(context_, rows), scored);  // each job's row of logits
    ops::logprob_forward(context_, scored, i32_on(context_, tokens), temperature, logp, lse, nullptr);
    Tensor host = Tensor::empty({jobs});
    context_.copy(logp, host);
    for (size_t k = 0; k < job_ids.size(); ++k) sampled_[job_ids[k]].logprob = host.data<float>()[k];
  }
}

void Engine::sample_rows(const Tensor& logits) {
  const int64_t V = model_.config().vocab_size;
  const int64_t jobs = static_cast<int64_t>(sampled_.size());
  const bool parallel = jobs * V >= kParallelSampleWork && samplers_.size() > 1;
  // The sampler throws on a row of non-finite logits (overflowing or non-finite weights): kept per thread and
  // rethrown here, naming the sequence, since an exception must not leave the parallel region.
  ParallelErrors errors(samplers_.size());
#pragma omp parallel num_threads(static_cast<int>(samplers_.size())) if (parallel)
  {
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    Sampler& sampler = samplers_[thread];
#pragma omp for schedule(static)
    for (int64_t j = 0; j < jobs; ++j) {
      errors.run(thread, [&] {
        SampledRow& r = sampled_[j];
        const Sequence& seq = *r.sequence;
        const SamplingParams& params = *seq.sampling;
        const SampleKey key{params.seed, seq.prompt_id(), static_cast<uint32_t>(seq.sample_index()),
                            static_cast<uint32_t>(r.position)};
        try {
          const float* row = logits.data<float>() + r.logits_row * V;
          const SampledToken t = sampler.sample(row, params, key);
          r.token = t.token;
          r.logprob = t.logprob;
          if (seq.num_top_logprobs > 0) r.top = sampler.top_logprobs(row, params, seq.num_top_logprobs);
        } catch (const Error& e) {
          RLCPP_FAIL("engine: sampling token " << r.position << " of prompt " << seq.prompt_index() << " sample "
                                               << seq.sample_index() << " (policy version " << policy_version_
                                               << "): " << e.what());
        }
      });
    }
  }
  errors.rethrow_first();
}

Tensor Engine::run_step(Scheduler& scheduler, RolloutStats& stats, const Stopwatch& clock) {
  const ModelConfig& mc = served_;
  Stopwatch phase;
  scheduler.schedule(batch_);
  int64_t unshared = 0;  // blocks the live tables reference, counting shared ones once per table
  for (const Sequence* seq : scheduler.running()) unshared += static_cast<int64_t>(seq->block_table.size());
  stats.peak_blocks_unshared = std::max(stats.peak_blocks_unshared, unshared);
  const double now = clock.seconds();
  for (const PrefillUnit& unit : batch_.prefills) {
    const Sequence& lead = *unit.sequences.front();
    const int64_t count = static_cast<int64_t>(unit.sequences.size());
    const int64_t recomputed_before = lead.kv_rows_recomputed;
    for (Sequence* seq : unit.sequences) {
      seq->count_kv_rows(unit.context_tokens);
      if (seq->scheduled_s < 0) seq->scheduled_s = now;
    }
    // lead.num_cached_tokens: a session's kept K/V, or the prefix cache's hits.
    stats.prefill_tokens += unit.context_tokens - lead.num_cached_tokens;
    stats.recomputed_tokens += lead.kv_rows_recomputed - recomputed_before;
    stats.prefill_tokens_saved += unit.cached_tokens + unit.context_tokens * (count - 1);
    if (blocks_.prefix_cache() && !unit.extends_session) {
      stats.prefix_cache_queried_tokens += unit.context_tokens;
      stats.prefix_cache_hit_tokens += unit.cached_tokens;
    }
  }
  for (Sequence* seq : batch_.decodes) seq->count_kv_rows(seq->num_tokens());
  stats.max_batch_sequences = std::max(stats.max_batch_sequences, batch_.num_sequences());
  build_step(batch_, blocks_);
  stats.schedule_s += phase.seconds();

  phase.reset();
  copy_blocks(batch_.copies);
  if (packed_stale_) {
    // The weights are prepared in the rollout numerics for the context's device (packed panels, the OpenBLAS
    // decode's copy, or the device copy, from host weights or from weights already on that device).
    model_.prepare_decode_weights(context_, *params_, packed_);
    packed_stale_ = false;
  }
  const Tensor step_logits = model_.forward_cached(context_, *params_, step_, cache_, &packed_, adapters_.get());
  const Tensor logits = host_logits(step_logits);
  stats.forward_s += phase.seconds();
  // The step's K/V is in the cache: full blocks it completed can be found by later sequences.
  for (const PrefillUnit& unit : batch_.prefills)
    for (Sequence* seq : unit.sequences) {
      seq->num_cached_tokens = unit.context_tokens;
      blocks_.register_full_blocks(*seq);
    }
  for (Sequence* seq : batch_.decodes) {
    seq->num_cached_tokens = seq->num_tokens();
    blocks_.register_full_blocks(*seq);
  }

  phase.reset();
  sample_rows(logits);
  // Host logits: the sampler's row_logprob bits are a host trainer's already (see rescore_on_device).
  if (!step_logits.on_host()) rescore_on_device(step_logits);
  const double t_sampled = clock.seconds();
  for (const SampledRow& r : sampled_) {
    Sequence& seq = *r.sequence;
    const SamplingParams& sp = *seq.sampling;
    seq.append(r.token, r.logprob, policy_version_);
    if (seq.first_token_s < 0) {
      seq.first_token_s = t_sampled;
      seq.first_policy_version = policy_version_;
    }
    seq.last_policy_version = policy_version_;
    const bool eos = r.token == mc.eos_token_id && !sp.ignore_eos;
    const bool stop = std::find(sp.stop_tokens.begin(), sp.stop_tokens.end(), static_cast<int64_t>(r.token)) !=
                      sp.stop_tokens.end();
    if (eos || stop || seq.num_turn_output() >= sp.max_new_tokens ||
        seq.num_tokens() >= mc.max_position_embeddings) {
      seq.finish(eos ? FinishReason::kEos : stop ? FinishReason::kStop : FinishReason::kLength);
      seq.finished_s = t_sampled;
    }
  }
  stats.generated_tokens += static_cast<int64_t>(sampled_.size());
  scheduler.release_finished();
  stats.sample_s += phase.seconds();
  ++stats.steps;
  return logits;
}

const std::vector<SampledRow>& Engine::step(Scheduler& scheduler, RolloutStats& stats, const Stopwatch& clock) {
  try {
    run_step(scheduler, stats, clock);
  } catch (...) {
    sampled_.clear();
    throw;
  }
  return sampled_;
}

Scheduler Engine::new_scheduler() {
  return Scheduler(blocks_, {config_.max_num_seqs, config_.max_num_batched_tokens, config_.static_batching},
                   &parked_);
}

void Engine::drive(Scheduler& scheduler, RolloutStats& stats, const StepObserver& observer, const Stopwatch& clock) {
  const int64_t preemptions_before = scheduler.num_preemptions(), evictions_before = scheduler.num_evictions();
  while (scheduler.has_work()) {
    const Tensor logits = run_step(scheduler, stats, clock);
    if (observer) observer(StepView{stats.steps, batch_, step_, logits, sampled_, scheduler, blocks_});
  }
  stats.preemptions += scheduler.num_preemptions() - preemptions_before;
  stats.evictions += scheduler.num_evictions() - evictions_before;
}

RolloutResult Engine::generate(const Request& request, const StepObserver& observer) {
  request.validate(served_);
  const int64_t P = static_cast<int64_t>(request.prompts.size()), n = request.n;
  Stopwatch clock;

  std::vector<Sequence> sequences;
  sequences.reserve(static_cast<size_t>(P * n));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < n; ++i) {
      sequences.emplace_back(p * n + i, p, request.prompt_id(static_cast<size_t>(p)), i, request.prompts[p]);
      sequences.back().sampling = &request.sampling;
    }

  blocks_.reset_peak();
  Scheduler scheduler = new_scheduler();
  for (int64_t p = 0; p < P; ++p) {
    std::vector<Sequence*> group;
    for (int64_t i = 0; i < n; ++i) group.push_back(&sequences[p * n + i]);
    scheduler.add_group(std::move(group));
  }

  RolloutStats stats;
  stats.sequences = P * n;
  stats.kv_bytes_per_token = kv_bytes_per_token();
  stats.block_size = cache_.block_size;
  stats.num_blocks = cache_.num_blocks;
  try {
    drive(scheduler, stats, observer, clock);
  } catch (...) {
    // The engine's blocks outlive the request: give back what its sequences hold.
    scheduler.drop_all();
    throw;
  }
  stats.peak_blocks_in_use = blocks_.peak_used();
  stats.wall_s = clock.seconds();

  RolloutResult result;
  result.samples.resize(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Sequence& seq = sequences[i];
    RLCPP_CHECK(seq.status() == SequenceStatus::kFinished, "engine: sequence " << i << " ended the request "
                                                                              << sequence_status_name(seq.status()));
    Sample& s = result.samples[i];
    s.prompt_index = seq.prompt_index();
    s.sample_index = seq.sample_index();
    s.tokens = seq.output();
    s.logprobs = seq.logprobs();
    s.scoring = seq.sampling->scoring();
    s.finish_reason = seq.finish_reason();
    s.policy_version = seq.first_policy_version;
    s.last_policy_version = seq.last_policy_version;
    s.num_preemptions = seq.num_preemptions();
    s.scheduled_s = seq.scheduled_s;
    s.first_token_s = seq.first_token_s;
    s.finished_s = seq.finished_s;
  }
  result.stats = stats;
  return result;
}

}  // namespace rlcpp
