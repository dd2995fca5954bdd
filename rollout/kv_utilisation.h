// How full the KV cache's allocated slots are, step by step: vLLM's argument for paging. Each engine step, the
// tokens the running sequences hold in the cache are set against
//   - paged: the slots of the blocks they hold (only a sequence's last block is partly empty), and
//   - contiguous: the slots a cache that reserves each sequence's longest possible length up front (prompt +
//     max_new_tokens, capped by the context) would hold for the same sequences.
// Each sequence is counted through its own block table (a block a group shares counts in every table that holds
// it, as its tokens do), so the figures are of the layout, not of prefix sharing (RolloutStats has that).
// Use: `Engine::generate(request, [&](const StepView& v) { utilisation.add_step(v); })`.
#pragma once

#include <cstdint>

#include "rollout/engine.h"

namespace rlcpp {

class KvUtilisation {
 public:
  // `reserved_tokens`: what a contiguous cache would reserve per sequence (prompt + max_new_tokens, capped by
  // the context); the longest prompt's, for prompts of several lengths.
  explicit KvUtilisation(int64_t reserved_tokens);

  void add_step(const StepView& step);

  int64_t token_steps() const { return token_steps_; }  // Σ over steps of the running sequences' cached tokens
  // Σ cached tokens / Σ slots, over every step so far (0 before any step).
  double paged() const;
  double contiguous() const;

 private:
  int64_t reserved_tokens_;
  int64_t token_steps_ = 0;
  int64_t paged_slot_steps_ = 0;
  int64_t contiguous_slot_steps_ = 0;
};

}  // namespace rlcpp
