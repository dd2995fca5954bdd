#include "rollout/kv_utilisation.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

KvUtilisation::KvUtilisation(int64_t reserved_tokens) : reserved_tokens_(reserved_tokens) {
  RLCPP_CHECK(reserved_tokens >= 1,
              "KvUtilisation: reserved tokens per sequence must be >= 1, got " << reserved_tokens);
}

void KvUtilisation::add_step(const StepView& step) {
  const int64_t block_size = step.blocks.block_size();
  for (const Sequence* seq : step.scheduler.running()) {
    token_steps_ += seq->num_cached_tokens;
    paged_slot_steps_ += static_cast<int64_t>(seq->block_table.size()) * block_size;
    contiguous_slot_steps_ += std::max(reserved_tokens_, seq->num_cached_tokens);
  }
}

double KvUtilisation::paged() const {
  return paged_slot_steps_ > 0 ? static_cast<double>(token_steps_) / static_cast<double>(paged_slot_steps_) : 0.0;
}

double KvUtilisation::contiguous() const {
  return contiguous_slot_steps_ > 0 ? static_cast<double>(token_steps_) / static_cast<double>(contiguous_slot_steps_)
                                    : 0.0;
}

}  // namespace rlcpp
