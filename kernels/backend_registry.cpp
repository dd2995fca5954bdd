// The backends of this build and the dispatch's lookup (kernels/backend.h). Registering a backend is one line in
// registered() below.
#include <string>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/reference/backend_reference.h"
#ifdef RLCPP_WITH_CUDA
#include "kernels/cuda/backend_cuda.h"
#endif

namespace rlcpp::ops {
namespace {

// A backend must fill every entry: an empty one would be a null call at its first use.
void check_complete(const Backend& b) {
  const void* entries[] = {
      reinterpret_cast<const void*>(b.supports),           reinterpret_cast<const void*>(b.matmul),
      reinterpret_cast<const void*>(b.pack_weight),        reinterpret_cast<const void*>(b.pack_weight_transposed),
      reinterpret_cast<const void*>(b.matmul_packed),      reinterpret_cast<const void*>(b.round_to),
      reinterpret_cast<const void*>(b.convert),            reinterpret_cast<const void*>(b.linear_weight_grad),
      reinterpret_cast<const void*>(b.add_bias),           reinterpret_cast<const void*>(b.bias_backward),
      reinterpret_cast<const void*>(b.add_inplace),        reinterpret_cast<const void*>(b.scale_inplace),
      reinterpret_cast<const void*>(b.l2_norm),            reinterpret_cast<const void*>(b.all_finite),
      reinterpret_cast<const void*>(b.keyed_checksum),     reinterpret_cast<const void*>(b.embedding_forward),
      reinterpret_cast<const void*>(b.embedding_backward), reinterpret_cast<const void*>(b.rmsnorm_forward),
      reinterpret_cast<const void*>(b.rmsnorm_backward),   reinterpret_cast<const void*>(b.rope_forward),
      reinterpret_cast<const void*>(b.rope_backward),      reinterpret_cast<const void*>(b.rope_split_qkv),
      reinterpret_cast<const void*>(b.rope_backward_merge_qkv), reinterpret_cast<const void*>(b.split_qkv),
      reinterpret_cast<const void*>(b.merge_qkv),          reinterpret_cast<const void*>(b.attention_forward),
      reinterpret_cast<const void*>(b.attention_backward), reinterpret_cast<const void*>(b.paged_kv_write),
      reinterpret_cast<const void*>(b.paged_attention),    reinterpret_cast<const void*>(b.swiglu_forward),
      reinterpret_cast<const void*>(b.swiglu_backward),    reinterpret_cast<const void*>(b.logprob_forward),
      reinterpret_cast<const void*>(b.logprob_backward),   reinterpret_cast<const void*>(b.logprob_truncated_forward),
      reinterpret_cast<const void*>(b.logprob_truncated_backward), reinterpret_cast<const void*>(b.adamw_step)};
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; ++i)
    RLCPP_CHECK(entries[i] != nullptr, "backend " << b.name << ": entry " << i << " of its table is empty");
}

const std::vector<const Backend*>& registered() {
  static const std::vector<const Backend*> backends = [] {
    std::vector<const Backend*> all{&cpu_backend(), &reference_backend()};
#ifdef RLCPP_WITH_CUDA
    all.push_back(&cuda_backend());
#endif
    for (const Backend* b : all) check_complete(*b);
    return all;
  }();
  return backends;
}

}  // namespace

const char* op_name(Op op) {
  static const char* const names[] = {
      "matmul", "pack_weight", "pack_weight_transposed", "matmul_packed", "round_to", "convert",
      "linear_weight_grad", "add_bias", "bias_backward", "add_inplace", "scale_inplace", "embedding_forward",
      "embedding_backward", "rmsnorm_forward", "rmsnorm_backward", "rope_forward", "rope_backward", "rope_split_qkv",
      "rope_backward_merge_qkv", "split_qkv", "merge_qkv", "attention_forward", "attention_backward",
      "paged_kv_write", "paged_attention", "swiglu_forward", "swiglu_backward", "logprob_forward",
      "logprob_backward", "logprob_truncated_forward", "logprob_truncated_backward", "adamw_step", "l2_norm",
      "all_finite", "keyed_checksum"};
  static_assert(sizeof names / sizeof names[0] == static_cast<size_t>(Op::kCount), "a name for every op");
  return op < Op::kCount ? names[static_cast<int>(op)] : "?";
}

const Backend& backend_named(const std::string& name) {
  for (const Backend* b : registered())
    if (name == b->name) return *b;
  std::string known;
  for (const std::string& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  RLCPP_FAIL("no backend named '" << name << "' in this build (" << known << ")");
}

const Backend& backend_of(const ExecContext& ctx) {
  const Backend& b = backend_named(ctx.backend());
  RLCPP_CHECK(b.device == ctx.device(), "backend " << b.name << " runs on " << device_name(b.device)
                                                   << ", not on the " << ctx.name() << " context");
  return b;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const Backend* b : registered()) names.emplace_back(b->name);
  return names;
}

}  // namespace rlcpp::ops
