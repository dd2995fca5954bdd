// Attention ops of kernels/ops.h on the CPU: the training forward against a double-precision loop, its backward
// against central differences (GQA, several packed sequences), and batch invariance: paged_attention returns
// attention_forward's values bit for bit for any block size, prefill or decode, whatever else shares the call.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/exec_context.h"
#include "kernels/ops.h"
#include "tests/host_context.h"
#include "tests/kernels_test_support.h"

namespace rlcpp {
namespace {

using testing::host;

using testing::check_gradient;
using testing::error_of;
using testing::expect_near_all;
using testing::Guarded;
using testing::int_tensor;
using testing::Rng;
using testing::same_bits;
using testing::values_of;
using testing::weighted_sum;

std::vector<int32_t> cumulative(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> cu = {0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  return cu;
}

struct AttentionRef {
  std::vector<double> out, lse;
};
// Causal GQA attention of packed sequences in double.
AttentionRef attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu,
                                 double scale) {
  const int64_t n = q.size(0), hq = q.size(1), hkv = k.size(1), d = q.size(2);
  AttentionRef r{std::vector<double>(static_cast<size_t>(n * hq * d)), std::vector<double>(static_cast<size_t>(n * hq))};
  for (size_t b = 0; b + 1 < cu.size(); ++b)
    for (int64_t i = cu[b]; i < cu[b + 1]; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t g = h / (hq / hkv);
        std::vector<double> s;
        for (int64_t j = cu[b]; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c)
            dot += static_cast<double>(q.data<float>()[(i * hq + h) * d + c]) * k.data<float>()[(j * hkv + g) * d + c];
          s.push_back(scale * dot);
        }
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0.0;
        for (double x : s) sum += std::exp(x - m);
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0.0;
          for (int64_t j = cu[b]; j <= i; ++j)
            acc += std::exp(s[static_cast<size_t>(j - cu[b])] - m) * v.data<float>()[(j * hkv + g) * d + c];
          r.out[static_cast<size_t>((i * hq + h) * d + c)] = acc / sum;
        }
        r.lse[static_cast<size_t>(i * hq + h)] = m + std::log(sum);
      }
  return r;
}

// (Hq, Hkv, D) cases: GQA with two groups, multi-query, plain multi-head; D = 5 exercises the dot-product tail,
// D = 36 the sixteen-wide vectors (AVX-512), then an eight-wide chunk and a tail.
struct HeadShape {
  int64_t hq, hkv, d;
};
const HeadShape kHeadShapes[] = {{4, 2, 5}, {3, 1, 8}, {2, 2, 12}, {4, 2, 36}};

TEST(Attention, ForwardMatchesDoubleReference) {
  Rng rng(21);
  const std::vector<int32_t> cu = cumulative({1, 4, 6});
  const int64_t n = cu.back();
  for (const HeadShape& hs : kHeadShapes) {
    SCOPED_TRACE(::testing::Message() << "hq=" << hs.hq << " hkv=" << hs.hkv << " d=" << hs.d);
    Tensor q = rng.normal({n, hs.hq, hs.d}), k = rng.normal({n, hs.hkv, hs.d}), v = rng.normal({n, hs.hkv, hs.d});
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs.d));
    Guarded out({n, hs.hq, hs.d}), lse({n, hs.hq});
    ops::attention_forward(host(), q, k, v, int_tensor(cu), scale, out.t(), lse.t());
    const AttentionRef ref = attention_reference(q, k, v, cu, scale);
    expect_near_all(out.t(), ref.out, 1e-5, 1e-5, "out");
    expect_near_all(lse.t(), ref.lse, 1e-5, 1e-5, "lse");
    EXPECT_TRUE(out.guards_intact());
    EXPECT_TRUE(lse.guards_intact());
  }
}

TEST(Attention, CausalMaskHidesLaterTokens) {
  // A token's output depends on itself and the tokens before it only: new keys and values for positions 5..8 of
  // a 9-token sequence leave rows 0..4 bit for bit as they were, and change every later row.
  Rng rng(24);
  const int64_t n = 9, hq = 4, hkv = 2, d = 8, first_changed = 5;
  const Tensor cu = int_tensor({0, static_cast<int32_t>(n)});
  Tensor q = rng.normal({n, hq, d}), k = rng.normal({n, hkv, d}), v = rng.normal({n, hkv, d});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor before = Tensor::empty({n, hq, d}), after = Tensor::empty({n, hq, d}), lse = Tensor::empty({n, hq});
  ops::attention_forward(host(), q, k, v, cu, scale, before, lse);
  const Tensor later_k = rng.normal({n, hkv, d}), later_v = rng.normal({n, hkv, d});
  const int64_t row = hkv * d;  // floats of one position's keys (or values)
  std::memcpy(k.data<float>() + first_changed * row, later_k.data<float>() + first_changed * row,
              sizeof(float) * static_cast<size_t>((n - first_changed) * row));
  std::memcpy(v.data<float>() + first_changed * row, later_v.data<float>() + first_changed * row,
              sizeof(float) * static_cast<size_t>((n - first_changed) * row));
  ops::attention_forward(host(), q, k, v, cu, scale, after, lse);
  const size_t per_position = static_cast<size_t>(hq * d) * sizeof(float);
  for (int64_t i = 0; i < n; ++i) {
    const bool same =
        std::memcmp(before.data<float>() + i * hq * d, after.data<float>() + i * hq * d, per_position) == 0;
    EXPECT_EQ(same, i < first_changed) << "position " << i;
  }
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  Rng rng(22);
  const std::vector<int32_t> cu = cumulative({1, 4, 6});
  const int64_t n = cu.back();
  const Tensor cu_t = int_tensor(cu);
  for (const HeadShape& hs : kHeadShapes) {
    SCOPED_TRACE(::testing::Message() << "hq=" << hs.hq << " hkv=" << hs.hkv << " d=" << hs.d);
    Tensor q = rng.normal({n, hs.hq, hs.d}), k = rng.normal({n, hs.hkv, hs.d}), v = rng.normal({n, hs.hkv, hs.d});
    Tensor dout = rng.normal({n, hs.hq, hs.d});
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs.d));
    Tensor out = Tensor::empty({n, hs.hq, hs.d}), lse = Tensor::empty({n, hs.hq});
    ops::attention_forward(host(), q, k, v, cu_t, scale, out, lse);
    // Outputs start as NaN: the backward must overwrite every element.
    Guarded dq({n, hs.hq, hs.d}), dk({n, hs.hkv, hs.d}), dv({n, hs.hkv, hs.d});
    ops::attention_backward(host(), dout, q, k, v, out, lse, cu_t, scale, dq.t(), dk.t(), dv.t());
    EXPECT_TRUE(dq.guards_intact() && dk.guards_intact() && dv.guards_intact());
    auto objective = [&] {
      ops::attention_forward(host(), q, k, v, cu_t, scale, out, lse);
      return weighted_sum(dout, out);
    };
    EXPECT_GRAD_OK(check_gradient(q, values_of(dq.t()), objective), "dq");
    EXPECT_GRAD_OK(check_gradient(k, values_of(dk.t()), objective), "dk");
    EXPECT_GRAD_OK(check_gradient(v, values_of(dv.t()), objective), "dv");
  }
}

TEST(Attention, ResultsDoNotDependOnThreadCountOrPacking) {
  Rng rng(23);
  const std::vector<int32_t> lengths = {40, 3, 64, 17, 33, 50, 1, 29};
  const std::vector<int32_t> cu = cumulative(lengths);
  const int64_t n = cu.back(), hq = 4, hkv = 2, d = 32;
  Tensor q = rng.normal({n, hq, d}), k = rng.normal({n, hkv, d}), v = rng.normal({n, hkv, d});
  Tensor dout = rng.normal({n, hq, d});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  struct Result {
    Tensor out, lse, dq, dk, dv;
  };
  auto run = [&](int threads) {
    Result r{Tensor::empty(q.shape()), Tensor::empty({n, hq}), Tensor::empty(q.shape()), Tensor::empty(k.shape()),
             Tensor::empty(k.shape())};
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    ops::attention_forward(host(), q, k, v, int_tensor(cu), scale, r.out, r.lse);
    ops::attention_backward(host(), dout, q, k, v, r.out, r.lse, int_tensor(cu), scale, r.dq, r.dk, r.dv);
    omp_set_num_threads(saved);
    return r;
  };
  const Result one = run(1), two = run(2);
  EXPECT_TRUE(same_bits(one.out.data<float>(), two.out.data<float>(), one.out.numel()));
  EXPECT_TRUE(same_bits(one.lse.data<float>(), two.lse.data<float>(), one.lse.numel()));
  EXPECT_TRUE(same_bits(one.dq.data<float>(), two.dq.data<float>(), one.dq.numel()));
  EXPECT_TRUE(same_bits(one.dk.data<float>(), two.dk.data<float>(), one.dk.numel()));
  EXPECT_TRUE(same_bits(one.dv.data<float>(), two.dv.data<float>(), one.dv.numel()));

  // Each sequence alone gives the rows it gets when packed with the others.
  for (size_t b = 0; b < lengths.size(); ++b) {
    const int64_t begin = cu[b], end = cu[b + 1];
    Tensor out = Tensor::empty({end - begin, hq, d}), lse = Tensor::empty({end - begin, hq});
    ops::attention_forward(host(), q.slice_rows(begin, end), k.slice_rows(begin, end), v.slice_rows(begin, end),
                           int_tensor({0, static_cast<int32_t>(end - begin)}), scale, out, lse);
    EXPECT_TRUE(same_bits(out.data<float>(), one.out.data<float>() + begin * hq * d, out.numel())) << "sequence " << b;
  }
}

TEST(Attention, BadShapesAndSeqlensNameTheOp) {
  Tensor q = Tensor::zeros({5, 4, 8}), k = Tensor::zeros({5, 3, 8}), v = Tensor::zeros({5, 3, 8});
  Tensor out = Tensor::zeros({5, 4, 8}), lse = Tensor::zeros({5, 4});
  EXPECT_ERROR_MENTIONS(error_of([&] {
                          ops::attention_forward(host(), q, k, v, int_tensor({0, 5}), 1.0f, out, lse);
                        }),
                        "attention_forward: query heads 4 are not a multiple of kv heads 3");
  Tensor k2 = Tensor::zeros({5, 2, 8}), v2 = Tensor::zeros({5, 2, 8});
  EXPECT_ERROR_MENTIONS(error_of([&] {
                          ops::attention_forward(host(), q, k2, v2, int_tensor({0, 4}), 1.0f, out, lse);
                        }),
                        "attention_forward: cu_seqlens ends at 4 but there are 5 rows");
  Tensor bad_lse = Tensor::zeros({5, 2});
  EXPECT_ERROR_MENTIONS(error_of([&] {
                          ops::attention_forward(host(), q, k2, v2, int_tensor({0, 5}), 1.0f, out, bad_lse);
                        }),
                        "attention_forward: lse has shape (5, 2) but expected (5, 4)");
  Tensor dq = Tensor::zeros({5, 4, 8}), dk = Tensor::zeros({5, 2, 7}), dv = Tensor::zeros({5, 2, 8});
  EXPECT_ERROR_MENTIONS(
      error_of([&] {
        ops::attention_backward(host(), out, q, k2, v2, out, lse, int_tensor({0, 5}), 1.0f, dq, dk, dv);
      }),
      "attention_backward: dk has shape (5, 2, 7)");
}

// ---------------------------------------------------------------- paged KV cache

// Sequences of the given lengths packed row after row, with q/k/v and the training forward's output as the
// reference, and a cache whose blocks are handed out in shuffled order (so block tables are not contiguous).
class PagedFixture {
 public:
  PagedFixture(std::vector<int32_t> lengths, int64_t block_size, uint32_t seed)
      : lengths_(std::move(lengths)), cu_(cumulative(lengths_)), block_size_(block_size), rng_(seed) {
    n_ = cu_.back();
    q_ = rng_.normal({n_, kHq, kD});
    k_ = rng_.normal({n_, kHkv, kD});
    v_ = rng_.normal({n_, kHkv, kD});
    ref_out_ = Tensor::empty({n_, kHq, kD});
    Tensor lse = Tensor::empty({n_, kHq});
    ops::attention_forward(host(), q_, k_, v_, int_tensor(cu_), kScale, ref_out_, lse);

    int32_t total_blocks = 3;  // a few spare blocks nobody owns
    std::vector<int32_t> counts;
    for (int32_t len : lengths_) {
      counts.push_back(static_cast<int32_t>((len + block_size - 1) / block_size));
      total_blocks += counts.back();
    }
    std::vector<int32_t> order(static_cast<size_t>(total_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_.gen());
    indptr_ = {0};
    for (int32_t c : counts) {
      indices_.insert(indices_.end(), order.begin() + indptr_.back(), order.begin() + indptr_.back() + c);
      indptr_.push_back(indptr_.back() + c);
    }
    num_slots_ = total_blocks * block_size;
    reset_cache();
  }

  // NaN everywhere, so a read of a slot that was never written poisons the output.
  void reset_cache() {
    k_cache_ = testing::filled({num_slots_, kHkv, kD}, std::nanf(""));
    v_cache_ = testing::filled({num_slots_, kHkv, kD}, std::nanf(""));
  }

  int64_t num_seqs() const { return static_cast<int64_t>(lengths_.size()); }
  int32_t length(int64_t b) const { return lengths_[static_cast<size_t>(b)]; }
  int32_t row_of(int64_t b, int32_t pos) const { return cu_[static_cast<size_t>(b)] + pos; }
  int32_t slot_of(int64_t b, int32_t pos) const {
    return indices_[static_cast<size_t>(indptr_[static_cast<size_t>(b)] + pos / block_size_)] *
               static_cast<int32_t>(block_size_) + pos % static_cast<int32_t>(block_size_);
  }

  // One engine step over (sequence, position) pairs in the given order: write their k/v to the cache, then run
  // paged_attention on their queries, and check each output row bit for bit against the training forward.
  void step_and_check(const std::vector<std::pair<int64_t, int32_t>>& items) {
    const int64_t m = static_cast<int64_t>(items.size());
    Tensor q = Tensor::empty({m, kHq, kD}), k = Tensor::empty({m, kHkv, kD}), v = Tensor::empty({m, kHkv, kD});
    std::vector<int32_t> slots, seqs, positions;
    for (int64_t i = 0; i < m; ++i) {
      const auto [b, pos] = items[static_cast<size_t>(i)];
      const int32_t row = row_of(b, pos);
      std::memcpy(q.data<float>() + i * kHq * kD, q_.data<float>() + row * kHq * kD, kHq * kD * sizeof(float));
      std::memcpy(k.data<float>() + i * kHkv * kD, k_.data<float>() + row * kHkv * kD, kHkv * kD * sizeof(float));
      std::memcpy(v.data<float>() + i * kHkv * kD, v_.data<float>() + row * kHkv * kD, kHkv * kD * sizeof(float));
      slots.push_back(slot_of(b, pos));
      seqs.push_back(static_cast<int32_t>(b));
      positions.push_back(pos);
    }
    ops::paged_kv_write(host(), k, v, int_tensor(slots), k_cache_, v_cache_);
    Guarded out({m, kHq, kD});
    ops::paged_attention(host(), q, k_cache_, v_cache_, int_tensor(seqs), int_tensor(positions), int_tensor(indptr_),
                         int_tensor(indices_), block_size_, kScale, out.t());
    EXPECT_TRUE(out.guards_intact());
    for (int64_t i = 0; i < m; ++i) {
      const auto [b, pos] = items[static_cast<size_t>(i)];
      EXPECT_TRUE(same_bits(out.data() + i * kHq * kD, ref_out_.data<float>() + row_of(b, pos) * kHq * kD, kHq * kD))
          << "sequence " << b << " position " << pos << " (row " << i << " of a call of " << m << ")";
    }
  }

  Tensor& k_cache() { return k_cache_; }
  Tensor& v_cache() { return v_cache_; }
  const std::vector<int32_t>& indptr() const { return indptr_; }
  const std::vector<int32_t>& indices() const { return indices_; }
  Rng& rng() { return rng_; }

  static constexpr int64_t kHq = 4, kHkv = 2, kD = 32;
  static constexpr float kScale = 0.17677669f;  // 1/sqrt(32)

 private:
  std::vector<int32_t> lengths_, cu_;
  int64_t block_size_;
  Rng rng_;
  int64_t n_ = 0, num_slots_ = 0;
  Tensor q_, k_, v_, ref_out_, k_cache_, v_cache_;
  std::vector<int32_t> indptr_, indices_;
};

using Items = std::vector<std::pair<int64_t, int32_t>>;
const std::vector<int32_t> kPagedLengths = {1, 17, 54};
const int64_t kBlockSizes[] = {1, 3, 16};

TEST(PagedAttention, PrefillEqualsTrainingForwardBitForBit) {
  for (int64_t bs : kBlockSizes) {
    SCOPED_TRACE(::testing::Message() << "block_size=" << bs);
    PagedFixture f(kPagedLengths, bs, 31);
    // All sequences prefilled in one call.
    Items all;
    for (int64_t b = 0; b < f.num_seqs(); ++b)
      for (int32_t p = 0; p < f.length(b); ++p) all.push_back({b, p});
    f.step_and_check(all);
    // One sequence per call: its result does not depend on the others sharing the call.
    for (int64_t b = 0; b < f.num_seqs(); ++b) {
      Items one;
      for (int32_t p = 0; p < f.length(b); ++p) one.push_back({b, p});
      f.reset_cache();
      f.step_and_check(one);
    }
  }
}

TEST(PagedAttention, DecodeOneQueryAtATimeEqualsTrainingForwardBitForBit) {
  for (int64_t bs : kBlockSizes) {
    SCOPED_TRACE(::testing::Message() << "block_size=" << bs);
    PagedFixture f(kPagedLengths, bs, 32);
    for (int64_t b = 0; b < f.num_seqs(); ++b)
      for (int32_t p = 0; p < f.length(b); ++p) f.step_and_check({{b, p}});
  }
}

TEST(PagedAttention, MixedBatchesEqualTrainingForwardBitForBit) {
  for (int64_t bs : kBlockSizes) {
    SCOPED_TRACE(::testing::Message() << "block_size=" << bs);
    PagedFixture f(kPagedLengths, bs, 33);
    // Step 1: prefill of sequence 0, a 9-token chunk of sequence 1 and a 30-token chunk of sequence 2, rows
    // shuffled. Then decode steps of sequences 1 and 2 together, then a final chunked prefill of sequence 2.
    Items first;
    first.push_back({0, 0});
    for (int32_t p = 0; p < 9; ++p) first.push_back({1, p});
    for (int32_t p = 0; p < 30; ++p) first.push_back({2, p});
    std::shuffle(first.begin(), first.end(), f.rng().gen());
    f.step_and_check(first);
    for (int32_t p = 9; p < 17; ++p) f.step_and_check({{2, 30 + (p - 9)}, {1, p}});
    Items last;
    for (int32_t p = 38; p < 54; ++p) last.push_back({2, p});
    std::reverse(last.begin(), last.end());
    f.step_and_check(last);
  }
}

TEST(PagedAttention, IndexErrorsNameTheRow) {
  PagedFixture f({5, 4}, 3, 34);  // sequence 0 owns 2 blocks (6 slots), sequence 1 owns 2
  Tensor q = Tensor::zeros({2, PagedFixture::kHq, PagedFixture::kD});
  Tensor out = Tensor::zeros({2, PagedFixture::kHq, PagedFixture::kD});
  auto run = [&](std::vector<int32_t> seqs, std::vector<int32_t> pos, std::vector<int32_t> indices) {
    return error_of([&] {
      ops::paged_attention(host(), q, f.k_cache(), f.v_cache(), int_tensor(seqs), int_tensor(pos),
                           int_tensor(f.indptr()), int_tensor(indices), 3, PagedFixture::kScale, out);
    });
  };
  EXPECT_ERROR_MENTIONS(run({0, 1}, {2, 6}, f.indices()),
                        "paged_attention: query row 1 (sequence 1) is at position 6 but the sequence owns 2 blocks");
  EXPECT_ERROR_MENTIONS(run({0, 2}, {2, 1}, f.indices()), "paged_attention: query row 1 names sequence 2");
  std::vector<int32_t> bad = f.indices();
  bad[3] = 99;
  EXPECT_ERROR_MENTIONS(run({0, 1}, {1, 5}, bad), "paged_attention: query row 1 (sequence 1) uses block 99");
  // A bad block past the positions in use is not read and not an error.
  EXPECT_EQ(run({0, 1}, {1, 2}, bad), "");

  Tensor k = Tensor::zeros({1, PagedFixture::kHkv, PagedFixture::kD});
  EXPECT_ERROR_MENTIONS(
      error_of([&] { ops::paged_kv_write(host(), k, k, int_tensor({1000}), f.k_cache(), f.v_cache()); }),
      "paged_kv_write: slot_mapping[0] = 1000 is outside [-1, ");
}

TEST(PagedAttention, KvWriteSkipsMinusOneAndStaysInItsSlots) {
  const int64_t slots = 6, hkv = 2, d = 3;
  Rng rng(35);
  Tensor k = rng.normal({3, hkv, d}), v = rng.normal({3, hkv, d});
  Guarded k_cache({slots, hkv, d}), v_cache({slots, hkv, d});
  std::fill_n(k_cache.data(), slots * hkv * d, 0.0f);
  std::fill_n(v_cache.data(), slots * hkv * d, 0.0f);
  ops::paged_kv_write(host(), k, v, int_tensor({5, -1, 0}), k_cache.t(), v_cache.t());
  EXPECT_TRUE(k_cache.guards_intact() && v_cache.guards_intact());
  EXPECT_TRUE(same_bits(k_cache.data() + 5 * hkv * d, k.data<float>(), hkv * d));
  EXPECT_TRUE(same_bits(v_cache.data() + 0, v.data<float>() + 2 * hkv * d, hkv * d));
  for (int64_t s = 1; s < 5; ++s)
    for (int64_t e = 0; e < hkv * d; ++e) EXPECT_EQ(k_cache.data()[s * hkv * d + e], 0.0f) << "slot " << s;
}

// ---------------------------------------------------------------- CUDA (skipped without a GPU)

// The device copy of a host tensor, or its outputs poisoned with NaN.
struct OnDevice {
  ExecContext gpu = ExecContext::cuda(0);
  Tensor up(const Tensor& host) const { return gpu.copy_of(host); }
  Tensor nan(const Shape& shape) const { return gpu.copy_of(testing::filled(shape, std::nanf(""))); }
  Tensor down(const Tensor& dev) const {
    Tensor host = Tensor::empty(dev.shape(), dev.dtype());
    gpu.copy(dev, host);
    return host;
  }
};

TEST(CudaAttention, PackedForwardMatchesTheDoubleReference) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const OnDevice dev;
  Rng rng(23);
  const std::vector<int32_t> cu = cumulative({1, 12, 17, 54});
  const int64_t n = cu.back();
  for (const HeadShape& hs : kHeadShapes) {
    SCOPED_TRACE(::testing::Message() << "hq=" << hs.hq << " hkv=" << hs.hkv << " d=" << hs.d);
    Tensor q = rng.normal({n, hs.hq, hs.d}), k = rng.normal({n, hs.hkv, hs.d}), v = rng.normal({n, hs.hkv, hs.d});
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs.d));
    Tensor out = dev.nan({n, hs.hq, hs.d}), lse = dev.nan({n, hs.hq});
    ops::attention_forward(dev.gpu, dev.up(q), dev.up(k), dev.up(v), dev.up(int_tensor(cu)), scale, out, lse);
    const AttentionRef ref = attention_reference(q, k, v, cu, scale);
    expect_near_all(dev.down(out), ref.out, 1e-5, 1e-5, "out");
    expect_near_all(dev.down(lse), ref.lse, 1e-5, 1e-5, "lse");
  }
}

TEST(CudaAttention, BackwardMatchesTheCpuBackward) {
  // The CPU backward is the one checked by finite differences above; the device's, from the same out and lse,
  // must agree with it to fp32 rounding of other summation orders, every output overwritten (NaN before).
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const OnDevice dev;
  Rng rng(25);
  const std::vector<int32_t> cu = cumulative({1, 12, 17, 54});
  const int64_t n = cu.back();
  for (const HeadShape& hs : kHeadShapes) {
    SCOPED_TRACE(::testing::Message() << "hq=" << hs.hq << " hkv=" << hs.hkv << " d=" << hs.d);
    Tensor q = rng.normal({n, hs.hq, hs.d}), k = rng.normal({n, hs.hkv, hs.d}), v = rng.normal({n, hs.hkv, hs.d});
    const Tensor dout = rng.normal({n, hs.hq, hs.d});
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs.d));
    Tensor out = Tensor::empty({n, hs.hq, hs.d}), lse = Tensor::empty({n, hs.hq});
    ops::attention_forward(host(), q, k, v, int_tensor(cu), scale, out, lse);
    Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
    ops::attention_backward(host(), dout, q, k, v, out, lse, int_tensor(cu), scale, dq, dk, dv);
    Tensor ddq = dev.nan(q.shape()), ddk = dev.nan(k.shape()), ddv = dev.nan(v.shape());
    ops::attention_backward(dev.gpu, dev.up(dout), dev.up(q), dev.up(k), dev.up(v), dev.up(out), dev.up(lse),
                            dev.up(int_tensor(cu)), scale, ddq, ddk, ddv);
    auto doubles = [](const Tensor& t) { return std::vector<double>(t.data<float>(), t.data<float>() + t.numel()); };
    expect_near_all(dev.down(ddq), doubles(dq), 1e-4, 1e-4, "dq");
    expect_near_all(dev.down(ddk), doubles(dk), 1e-4, 1e-4, "dk");
    expect_near_all(dev.down(ddv), doubles(dv), 1e-4, 1e-4, "dv");
  }
}

TEST(CudaAttention, PagedCacheAndAttentionMatchTheCpuAndThePackedForward) {
  // For each cache dtype and block size: the device cache holds the CPU cache's bytes after paged_kv_write, the
  // paged attention of every row agrees with the CPU's, and (F32) equals the device's packed forward bit for bit:
  // one device function serves both, a query's result depends on its keys only.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const OnDevice dev;
  Rng rng(24);
  const std::vector<int32_t> lengths = {1, 17, 54}, cu = cumulative(lengths);
  const int64_t n = cu.back(), hq = 4, hkv = 2, d = 32;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Tensor q = rng.normal({n, hq, d}), k = rng.normal({n, hkv, d}), v = rng.normal({n, hkv, d});
  Tensor packed_out = dev.nan({n, hq, d}), packed_lse = dev.nan({n, hq});
  ops::attention_forward(dev.gpu, dev.up(q), dev.up(k), dev.up(v), dev.up(int_tensor(cu)), scale, packed_out,
                         packed_lse);
  const Tensor packed = dev.down(packed_out);
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const int64_t bs : {int64_t{1}, int64_t{16}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " block_size=" << bs);
      // Blocks handed out backwards, so a sequence's blocks are not in slot order.
      std::vector<int32_t> indptr = {0}, indices, slots, seqs, positions;
      int32_t next = 0;
      for (const int32_t len : lengths) next += static_cast<int32_t>((len + bs - 1) / bs);
      const int64_t num_slots = next * bs;
      for (size_t b = 0; b < lengths.size(); ++b) {
        const int32_t blocks = static_cast<int32_t>((lengths[b] + bs - 1) / bs);
        for (int32_t i = 0; i < blocks; ++i) indices.push_back(--next);
        indptr.push_back(static_cast<int32_t>(indices.size()));
        for (int32_t p = 0; p < lengths[b]; ++p) {
          slots.push_back(indices[static_cast<size_t>(indptr[b] + p / bs)] * static_cast<int32_t>(bs) + p % bs);
          seqs.push_back(static_cast<int32_t>(b));
          positions.push_back(p);
        }
      }
      Tensor k_cache = Tensor::zeros({num_slots, hkv, d}, dtype), v_cache = Tensor::zeros({num_slots, hkv, d}, dtype);
      Tensor out = Tensor::empty({n, hq, d});
      ops::paged_kv_write(host(), k, v, int_tensor(slots), k_cache, v_cache);
      ops::paged_attention(host(), q, k_cache, v_cache, int_tensor(seqs), int_tensor(positions), int_tensor(indptr),
                           int_tensor(indices), bs, scale, out);
      Tensor dk_cache = dev.gpu.zeros(k_cache.shape(), dtype), dv_cache = dev.gpu.zeros(v_cache.shape(), dtype);
      Tensor dout = dev.nan({n, hq, d});
      ops::paged_kv_write(dev.gpu, dev.up(k), dev.up(v), dev.up(int_tensor(slots)), dk_cache, dv_cache);
      ops::paged_attention(dev.gpu, dev.up(q), dk_cache, dv_cache, dev.up(int_tensor(seqs)),
                           dev.up(int_tensor(positions)), dev.up(int_tensor(indptr)), dev.up(int_tensor(indices)), bs,
                           scale, dout);
      EXPECT_EQ(std::memcmp(dev.down(dk_cache).raw(), k_cache.raw(), k_cache.nbytes()), 0) << "k cache bytes";
      EXPECT_EQ(std::memcmp(dev.down(dv_cache).raw(), v_cache.raw(), v_cache.nbytes()), 0) << "v cache bytes";
      const Tensor got = dev.down(dout);
      expect_near_all(got, std::vector<double>(out.data<float>(), out.data<float>() + out.numel()), 1e-5, 1e-5,
                      "paged out");
      if (dtype == DType::kF32) EXPECT_TRUE(same_bits(got.data<float>(), packed.data<float>(), got.numel()));
    }
  }
}

}  // namespace
}  // namespace rlcpp
