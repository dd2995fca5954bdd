#include "model/critic.h"

#include <cstring>

#include "core/error.h"
#include "core/philox.h"

namespace rlcpp {

namespace {
constexpr float kInitializerRange = 0.02f;
}  // namespace

ModelConfig critic_config(const ModelConfig& policy) {
  ModelConfig c = policy;
  c.value_head = true;
  return c;
}

ParameterStore critic_from_policy(const ParameterStore& policy, uint64_t seed) {
  RLCPP_CHECK(!policy.config().value_head, "critic_from_policy: the source model is already a critic (value_head)");
  ParameterStore critic(critic_config(policy.config()));
  for (const ParameterInfo& info : critic.infos()) {
    float* dst = critic.flat().data<float>() + info.offset;
    if (info.name == "score.weight") {
      PhiloxStream rng(seed, 0);
      for (int64_t k = 0; k < info.numel(); ++k) dst[k] = kInitializerRange * rng.normal();
    } else if (info.name == "score.bias") {
      dst[0] = 0.0f;
    } else {
      const Tensor src = policy.get(info.name);
      RLCPP_CHECK(src.shape() == info.shape, "critic_from_policy: '" << info.name << "' has shape "
                                                                     << shape_str(src.shape()) << ", expected "
                                                                     << shape_str(info.shape));
      std::memcpy(dst, src.data<float>(), static_cast<size_t>(info.numel()) * sizeof(float));
    }
  }
  return critic;
}

}  // namespace rlcpp
