#include "model/lora_unmerged.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"
#include "model/lora_kernels.h"

namespace rlcpp {

namespace {

constexpr int64_t kProducts = 4;  // LayerLinear's values
constexpr int64_t kRowBlock = 64;  // rows a thread takes at a time (a multiple of lora_kernels::kRows)
constexpr int64_t kParallelMinWork = int64_t{1} << 15;  // multiply-adds below which one thread does it all

size_t product_index(int64_t layer, LayerLinear linear) {
  return static_cast<size_t>(layer * kProducts + static_cast<int64_t>(linear));
}

void check_rows(const char* what, const Tensor& t, int64_t n, int64_t width) {
  RLCPP_CHECK(t.on_host() && t.dtype() == DType::kF32 && t.dim() == 2 && t.size(0) == n && t.size(1) >= width,
              "unmerged LoRA: " << what << " must be F32 host rows (" << n << ", >= " << width << ")");
}

}  // namespace

UnmergedLora::UnmergedLora(const LoraAdapters& adapters) : config_(adapters.config()) {
  const float* w = adapters.weights().flat().data<float>();
  const int64_t r = config_.rank;
  int64_t layers = 0;
  for (const LoraTarget& t : adapters.targets()) layers = std::max(layers, t.layer + 1);
  by_product_.resize(static_cast<size_t>(layers * kProducts));
  for (size_t ti = 0; ti < adapters.targets().size(); ++ti) {
    const LoraTarget& t = adapters.targets()[ti];
    Target u{static_cast<int64_t>(ti), t.row, t.out, t.in, static_cast<int64_t>(ab_.size()), 0};
    ab_.insert(ab_.end(), w + t.a, w + t.a + r * t.in);
    u.b = static_cast<int64_t>(ab_.size());
    ab_.insert(ab_.end(), w + t.b, w + t.b + t.out * r);
    // The transposes, laid out as the products read them: Aᵀ (in, r) at u.a, Bᵀ (r, out) at u.b.
    ab_t_.resize(ab_.size());
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < t.in; ++i) ab_t_[static_cast<size_t>(u.a + i * r + k)] = w[t.a + k * t.in + i];
    for (int64_t o = 0; o < t.out; ++o)
      for (int64_t k = 0; k < r; ++k) ab_t_[static_cast<size_t>(u.b + k * t.out + o)] = w[t.b + o * r + k];
    by_product_[product_index(t.layer, t.linear)].push_back(u);
  }
}

const std::vector<UnmergedLora::Target>& UnmergedLora::targets_of(int64_t layer, LayerLinear linear) const {
  static const std::vector<Target> none;
  const size_t i = product_index(layer, linear);
  return layer >= 0 && i < by_product_.size() ? by_product_[i] : none;
}

bool UnmergedLora::adapts(int64_t layer, LayerLinear linear) const { return !targets_of(layer, linear).empty(); }

UnmergedLora::RowBlocks UnmergedLora::row_blocks(const std::vector<Target>& targets, int64_t n) const {
  int64_t work = 0;  // multiply-adds of the side products
  for (const Target& t : targets) work += n * config_.rank * (t.in + t.out);
  const bool parallel = work > kParallelMinWork && omp_get_max_threads() > 1 && !omp_in_parallel();
  const int64_t threads = parallel ? omp_get_max_threads() : 1;
  // A share per thread (a decode step's few rows too), whole groups of lora_kernels::kRows, at most kRowBlock.
  const int64_t share = (n + threads - 1) / threads;
  const int64_t rows = std::clamp((share + lora_kernels::kRows - 1) / lora_kernels::kRows * lora_kernels::kRows,
                                  lora_kernels::kRows, kRowBlock);
  return {rows, (n + rows - 1) / rows, parallel};
}

void UnmergedLora::add(int64_t layer, LayerLinear linear, const Tensor& x, Tensor& y, int64_t row0) const {
  using namespace lora_kernels;
  const std::vector<Target>& targets = targets_of(layer, linear);
  const int64_t n = x.size(0), r = config_.rank, width = y.size(1);
  for (const Target& t : targets) {
    check_rows("the product's input", x, n, t.in);
    check_rows("the product", y, n, t.row + t.out);
    RLCPP_CHECK(x.size(1) == t.in, "unmerged LoRA: layer " << layer << " got inputs of " << x.size(1)
                                                           << " features, its adapter reads " << t.in);
  }
  // Blocks of rows side by side on the threads, the product's targets one after another in each: every row's
  // sums are its own, the same in any block.
  const RowBlocks split = row_blocks(targets, n);
#pragma omp parallel for schedule(static) if (split.parallel)
  for (int64_t blk = 0; blk < split.count; ++blk) {
    const int64_t r0 = blk * split.rows, rows = std::min(split.rows, n - r0);
    thread_local std::vector<float> u, delta, dropped, scale;
    for (const Target& t : targets) {
      u.resize(static_cast<size_t>(rows * r));
      delta.resize(static_cast<size_t>(rows * t.out));
      const float* xa = x.data<float>() + r0 * t.in;
      if (dropout_.active()) {  // the adapter's input, dropped
        dropped.resize(static_cast<size_t>(rows * t.in));
        scale.resize(static_cast<size_t>(t.in));
        for (int64_t i = 0; i < rows; ++i) {
          lora_dropout_scales(dropout_.key, t.index, row0 + r0 + i, dropout_.p, t.in, scale.data());
          for (int64_t c = 0; c < t.in; ++c)
            dropped[static_cast<size_t>(i * t.in + c)] = xa[i * t.in + c] * scale[static_cast<size_t>(c)];
        }
        xa = dropped.data();
      }
      times_rows(xa, t.in, ab_t_.data() + t.a, rows, t.in, r, 1.0f, u.data());  // x·Aᵀ
      times_rows(u.data(), r, ab_t_.data() + t.b, rows, r, t.out, config_.scale(), delta.data());       // s·u·Bᵀ
      float* out = y.data<float>() + r0 * width + t.row;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t o = 0; o < t.out; ++o) out[i * width + o] += delta[static_cast<size_t>(i * t.out + o)];
    }
  }
}

void UnmergedLora::add_input_grad(int64_t layer, LayerLinear linear, const Tensor& dy, Tensor& dx,
                                  int64_t row0) const {
  using namespace lora_kernels;
  const std::vector<Target>& targets = targets_of(layer, linear);
  const int64_t n = dy.size(0), r = config_.rank, width = dy.size(1), ld = dx.size(1);
  for (const Target& t : targets) {
    check_rows("the product's gradient", dy, n, t.row + t.out);
    check_rows("the input gradient", dx, n, t.in);
  }
  // The targets of a product share its input, so each row's gradient takes their shares in order.
  const RowBlocks split = row_blocks(targets, n);
#pragma omp parallel for schedule(static) if (split.parallel)
  for (int64_t blk = 0; blk < split.count; ++blk) {
    const int64_t r0 = blk * split.rows, rows = std::min(split.rows, n - r0);
    thread_local std::vector<float> v, d, scale;
    for (const Target& t : targets) {
      v.resize(static_cast<size_t>(rows * r));
      d.resize(static_cast<size_t>(rows * t.in));
      times_rows(dy.data<float>() + r0 * width + t.row, width, ab_.data() + t.b, rows, t.out, r, config_.scale(),
                 v.data());                                                                // s·dy·B
      times_rows(v.data(), r, ab_.data() + t.a, rows, r, t.in, 1.0f, d.data());            // (·)·A
      float* g = dx.data<float>() + r0 * ld;
      if (dropout_.active()) scale.resize(static_cast<size_t>(t.in));
      for (int64_t i = 0; i < rows; ++i) {
        const float* through = d.data() + i * t.in;
        if (dropout_.active()) {  // the input gradient of a dropped column is 0
          lora_dropout_scales(dropout_.key, t.index, row0 + r0 + i, dropout_.p, t.in, scale.data());
          for (int64_t c = 0; c < t.in; ++c) g[i * ld + c] += through[c] * scale[static_cast<size_t>(c)];
        } else {
          for (int64_t c = 0; c < t.in; ++c) g[i * ld + c] += through[c];
        }
      }
    }
  }
}

}  // namespace rlcpp
