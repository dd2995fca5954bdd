#include "model/generate.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/philox.h"

namespace rlcpp {

namespace {

// Picks a token from one row of logits (V) and returns it with its log-probability under logits / T.
std::pair<int32_t, float> pick(const float* logits, int64_t V, float temperature, uint64_t seed, uint32_t seq,
                               uint32_t position) {
  const double T = temperature > 0 ? temperature : 1.0;
  double mx = -INFINITY;
  int32_t argmax = 0;
  for (int64_t j = 0; j < V; ++j)
    if (logits[j] > mx) mx = logits[j], argmax = static_cast<int32_t>(j);
  double sum = 0;
  for (int64_t j = 0; j < V; ++j) sum += std::exp((logits[j] - mx) / T);
  const double log_z = std::log(sum);
  int32_t token = argmax;
  if (temperature > 0) {
    PhiloxDraw d = philox_draw(seed, seq, position, 0, 0);
    double u = philox_uniform_double(d.v[0], d.v[1]) * sum, acc = 0;
    token = static_cast<int32_t>(V - 1);
    for (int64_t j = 0; j < V; ++j) {
      acc += std::exp((logits[j] - mx) / T);
      if (u < acc) {
        token = static_cast<int32_t>(j);
        break;
      }
    }
  }
  return {token, static_cast<float>((logits[token] - mx) / T - log_z)};
}

}  // namespace

std::vector<Generation> generate(const Transformer& model, const ParameterStore& params,
                                 const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& options) {
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size, max_pos = cfg.max_position_embeddings;
  RLCPP_CHECK(options.max_batch > 0 && options.block_size > 0 && options.max_new_tokens >= 0,
              "generate: max_batch, block_size must be positive and max_new_tokens non-negative");
  std::vector<Generation> out(prompts.size());
  PackedWeights packed;  // packed once for all the batches (the CPU decode path)
  const bool use_packed = params.flat().device() == Device::kCPU;
  if (use_packed) model.prepare_decode_weights(params, packed);
  for (size_t begin = 0; begin < prompts.size(); begin += options.max_batch) {
    const size_t end = std::min(prompts.size(), begin + static_cast<size_t>(options.max_batch));
    const int64_t B = static_cast<int64_t>(end - begin);
    int64_t longest = 0;
    for (size_t s = begin; s < end; ++s) {
      RLCPP_CHECK(!prompts[s].empty(), "generate: prompt " << s << " is empty");
      RLCPP_CHECK(static_cast<int64_t>(prompts[s].size()) <= max_pos,
                  "generate: prompt " << s << " has " << prompts[s].size() << " tokens, the context is " << max_pos);
      longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts[s].size()));
    }
    const int64_t max_len = std::min(max_pos, longest + options.max_new_tokens);
    const int64_t blocks_per_seq = (max_len + options.block_size - 1) / options.block_size;
    KVCache cache(cfg, B * blocks_per_seq, options.block_size, model.numerics().compute);

    std::vector<int32_t> length(B);  // tokens in the cache (or about to be) per sequence
    std::vector<int32_t> next(B);    // token to feed next
    std::vector<bool> active(B, true);
    CachedStep step;
    auto add_row = [&](int64_t b, int32_t token, int32_t pos) {
      step.tokens.push_back(token);
      step.positions.push_back(pos);
      step.query_seq.push_back(static_cast<int32_t>(b));
      int32_t block = static_cast<int32_t>(b * blocks_per_seq + pos / options.block_size);
      step.slot_mapping.push_back(static_cast<int32_t>(block * options.block_size + pos % options.block_size));
    };
    auto reset_step = [&]() {
      step = CachedStep();
      for (int64_t b = 0; b <= B; ++b) step.block_indptr.push_back(static_cast<int32_t>(b * blocks_per_seq));
      for (int64_t i = 0; i < B * blocks_per_seq; ++i) step.block_indices.push_back(static_cast<int32_t>(i));
    };
    reset_step();
    for (int64_t b = 0; b < B; ++b) {
      const auto& p = prompts[begin + b];
      for (size_t t = 0; t < p.size(); ++t) add_row(b, p[t], static_cast<int32_t>(t));
      step.logits_rows.push_back(static_cast<int32_t>(step.tokens.size() - 1));
      length[b] = static_cast<int32_t>(p.size());
    }
    std::vector<int64_t> row_seq(B);
    for (int64_t b = 0; b < B; ++b) row_seq[b] = b;
    for (int64_t t = 0; t < options.max_new_tokens && !step.logits_rows.empty(); ++t) {
      Tensor logits = model.forward_cached(params, step, cache, use_packed ? &packed : nullptr);
      std::vector<int64_t> asked = row_seq;
      reset_step();
      row_seq.clear();
      for (size_t r = 0; r < asked.size(); ++r) {
        const int64_t b = asked[r];
        auto [token, logp] = pick(logits.data<float>() + r * V, V, options.temperature, options.seed,
                                  static_cast<uint32_t>(begin + b), static_cast<uint32_t>(length[b]));
        Generation& g = out[begin + b];
        g.tokens.push_back(token);
        g.logprobs.push_back(logp);
        if (token == cfg.eos_token_id) {
          g.finished_by_eos = true;
          active[b] = false;
        } else if (length[b] >= max_len) {  // no room for the token just sampled
          active[b] = false;
        }
        if (!active[b]) continue;
        add_row(b, token, length[b]);
        ++length[b];
        step.logits_rows.push_back(static_cast<int32_t>(step.tokens.size() - 1));
        row_seq.push_back(b);
      }
    }
  }
  return out;
}

}  // namespace rlcpp
