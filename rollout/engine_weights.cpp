// The engine's weights: a new version read in place (set_weights), made the engine's own (take_weights), or
// copied from a buffer its owner goes on updating (take_copy_of); the bytes they hold; and the prefix cache's
// salt, which changes with every version so that no K/V of older weights is found again.
#include <xxhash.h>

#include <string>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/finite_weights.h"
#include "model/lora_unmerged.h"
#include "rollout/engine.h"

namespace rlcpp {

uint64_t Engine::cache_salt() const {
  const std::string numerics = model_.numerics().describe();
  const uint64_t head[2] = {static_cast<uint64_t>(policy_version_), static_cast<uint64_t>(weights_epoch_)};
  return XXH3_64bits_withSeed(numerics.data(), numerics.size(), XXH3_64bits(head, sizeof head));
}

void Engine::set_weights(const ParameterStore& params, int64_t version) {
  RLCPP_CHECK(params.numel() == model_.config().num_parameters(),
              "engine: new weights have " << params.numel() << " floats, the model has "
                                          << model_.config().num_parameters());
  RLCPP_CHECK(params.flat().on_host() || context_.holds(params.flat()),
              "engine: new weights are on " << device_name(params.flat().device()) << ", the engine runs on "
                                            << context_.name());
  // Here rather than as "non-finite logits" in the sampler, steps later; the weights in use stay in place.
  const std::string refusing = "engine: refusing weights of policy version " + std::to_string(version);
  if (params.flat().on_host())
    check_finite_weights(params, refusing);
  else if (!ops::all_finite(context_, params.flat())) {  // which tensor, read on the host
    Tensor host;
    const auto bad = find_non_finite(params.infos(), host_tensor(context_, params.flat(), host).data<float>());
    RLCPP_FAIL(refusing << ": " << (bad ? bad->describe() : std::string("they hold a NaN or an infinity")));
  }
  params_ = &params;
  policy_version_ = version;
  packed_stale_ = true;
  // No K/V of the weights before is found again, whatever the versions' numbers.
  ++weights_epoch_;
  blocks_.set_cache_salt(cache_salt());
}

void Engine::take_weights(ParameterStore params, int64_t version) {
  set_weights(params, version);  // checked as set_weights checks them; nothing changes when refused
  owned_ = std::move(params);
  params_ = &owned_;
  model_.prepare_decode_weights(context_, owned_, packed_, /*self_contained=*/true);
  packed_stale_ = false;
  if (packed_.self_contained()) owned_ = ParameterStore();  // the decode reads its own copies
}

void Engine::take_copy_of(const ParameterStore& params, int64_t version) {
  set_weights(params, version);  // checked as set_weights checks them; nothing changes when refused
  owned_ = ParameterStore();
  model_.prepare_decode_weights(context_, params, packed_, /*self_contained=*/true);
  packed_stale_ = false;
  if (!packed_.self_contained()) {
    owned_ = params.clone();  // the decode reads the store: a copy of it, prepared again before the next step
    packed_stale_ = true;
  }
  params_ = &owned_;
}

void Engine::set_adapters(std::shared_ptr<const UnmergedLora> adapters, int64_t version) {
  RLCPP_CHECK(adapters == nullptr || context_.is_host(),
              "engine: unmerged LoRA adapters run on the host, not on " << context_.name());
  adapters_ = std::move(adapters);
  policy_version_ = version;
  ++weights_epoch_;
  blocks_.set_cache_salt(cache_salt());
}

int64_t Engine::weight_bytes() const {
  int64_t bytes = params_->flat().defined() ? static_cast<int64_t>(params_->flat().nbytes()) : 0;
  if (adapters_) bytes += adapters_->bytes();
  if (packed_.blas.flat().defined() && packed_.blas.flat().raw() != params_->flat().raw())
    bytes += static_cast<int64_t>(packed_.blas.flat().nbytes());
  auto add = [&bytes](const Tensor& t) {
    if (t.defined()) bytes += static_cast<int64_t>(t.nbytes());
  };
  auto add_packed = [&](const ops::PackedWeight& w) {
    add(w.panels);
    add(w.scales);
  };
  add_packed(packed_.lm_head);
  add(packed_.embed);
  add(packed_.final_norm);
  for (const PackedWeights::Layer& l : packed_.layers) {
    for (const ops::PackedWeight* w : {&l.qkv, &l.o, &l.gate_up, &l.down}) add_packed(*w);
    for (const Tensor* t : {&l.qkv_b, &l.o_b, &l.ln1, &l.ln2, &l.q_norm, &l.k_norm}) add(*t);
  }
  return bytes;
}

// Counted from the cache's own tensors (K and V of every layer), not from the shapes' formula, so the run
// ledger can hold the formula against it.

}  // namespace rlcpp
