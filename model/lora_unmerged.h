// LoRA adapters run unmerged beside the base weights (Transformer's LinearAdapters): a snapshot of a run's
// adapters (model/lora.h) that a forward, the rollout engine's decode or the backward of an unmerged trainer
// applies to each adapted product: y += s·(x·Aᵀ)·Bᵀ, the input gradient dx += s·(dy·B)·A.
//
// Why unmerged: the engine keeps the base as it was prepared (packed, rounded to its dtype) once for the whole
// run, and a weight sync replaces the adapters alone — nothing of the model's size is merged or repacked per
// version (rollout.lora_merge false); and it is the other way of computing the same policy, whose difference
// from the merged trainer the mismatch lab measures (docs/mismatch.md). The order of every sum is fixed: u = x·Aᵀ an
// fma chain over the input, y's delta a chain over r, scaled by s, added to the rounded product and rounded again
// (LinearAdapters): a row's output is the same bits whatever the batch, and an engine and a trainer's forward
// with the same snapshot agree exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "model/lora.h"
#include "model/transformer.h"

namespace rlcpp {

class UnmergedLora final : public LinearAdapters {
 public:
  UnmergedLora() = default;
  // A snapshot of `adapters` (their values now; later changes to them are not seen).
  explicit UnmergedLora(const LoraAdapters& adapters);

  const LoraConfig& config() const { return config_; }
  // A training pass with LoRA dropout (lora_dropout_scale: the adapters' inputs masked, and their input gradients
  // by the same masks); {} for none (the engine's, scoring passes).
  void set_dropout(LoraDropout dropout) { dropout_ = dropout; }
  bool adapts(int64_t layer, LayerLinear linear) const override;
  void add(int64_t layer, LayerLinear linear, const Tensor& x, Tensor& y, int64_t row0) const override;
  void add_input_grad(int64_t layer, LayerLinear linear, const Tensor& dy, Tensor& dx, int64_t row0) const override;
  // The snapshot's bytes (A and B, and their transposes).
  int64_t bytes() const { return static_cast<int64_t>(sizeof(float) * (ab_.size() + ab_t_.size())); }

 private:
  struct Target {
    int64_t index;  // in LoraAdapters::targets() (a dropout's masks are drawn by it)
    int64_t row, out, in;
    int64_t a, b;  // offsets of A (r, in) and B (out, r) in ab_, and of Aᵀ (in, r) and Bᵀ (r, out) in ab_t_
  };
  const std::vector<Target>& targets_of(int64_t layer, LayerLinear linear) const;
  // How the n rows of one product's side products are split between the threads.
  struct RowBlocks {
    int64_t rows, count;  // rows a block, blocks
    bool parallel;
  };
  RowBlocks row_blocks(const std::vector<Target>& targets, int64_t n) const;

  LoraConfig config_;
  LoraDropout dropout_;
  std::vector<float> ab_, ab_t_;
  std::vector<std::vector<Target>> by_product_;  // [layer * 4 + linear]
};

}  // namespace rlcpp
