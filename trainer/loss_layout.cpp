#include "trainer/loss_layout.h"

#include "core/error.h"

namespace rlcpp {

std::vector<int64_t> loss_offsets(const PackedBatch& batch) {
  return std::vector<int64_t>(batch.cu_seqlens.begin(), batch.cu_seqlens.end());
}

std::vector<float> target_mask(const PackedBatch& batch) {
  std::vector<float> mask(batch.targets.size());
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = batch.targets[i] >= 0 ? 1.0f : 0.0f;
  return mask;
}

ResponseLayout response_layout(const std::vector<RolloutSample>& samples) {
  ResponseLayout l;
  l.cu.push_back(0);
  for (size_t i = 0; i < samples.size(); ++i) {
    const RolloutSample& s = samples[i];
    RLCPP_CHECK(s.mask.empty() || s.mask.size() == s.response.size(),
                "rollout sample " << i << ": mask has " << s.mask.size() << " entries for " << s.response.size()
                                  << " response tokens");
    l.cu.push_back(l.cu.back() + static_cast<int64_t>(s.response.size()));
    if (s.mask.empty()) l.mask.insert(l.mask.end(), s.response.size(), 1.0f);
    else l.mask.insert(l.mask.end(), s.mask.begin(), s.mask.end());
  }
  return l;
}

std::vector<float> ResponseLayout::flatten(const std::vector<RolloutSample>& samples, RolloutField field,
                                           const char* name) const {
  RLCPP_CHECK(samples.size() + 1 == cu.size(), "ResponseLayout::flatten: " << samples.size() << " samples for "
                                                                           << cu.size() - 1 << " sequences");
  std::vector<float> out;
  out.reserve(mask.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::vector<float>& a = samples[i].*field;
    RLCPP_CHECK(static_cast<int64_t>(a.size()) == cu[i + 1] - cu[i],
                "rollout sample " << i << ": " << name << " has " << a.size() << " entries, expected one per "
                                  << "response token (" << cu[i + 1] - cu[i] << ")");
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

std::vector<std::vector<float>> ResponseLayout::split(std::span<const float> per_token) const {
  RLCPP_CHECK(per_token.size() == mask.size(), "ResponseLayout::split: " << per_token.size() << " values for "
                                                                         << mask.size() << " response tokens");
  std::vector<std::vector<float>> out(cu.size() - 1);
  for (size_t i = 0; i + 1 < cu.size(); ++i) out[i].assign(per_token.begin() + cu[i], per_token.begin() + cu[i + 1]);
  return out;
}

}  // namespace rlcpp
