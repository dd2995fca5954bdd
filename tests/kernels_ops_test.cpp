// CPU fp32 ops of kernels/ops.h (all but attention, see kernels_attention_test.cpp): forwards against naive
// double-precision loops, every backward against central differences, guard bytes, AdamW against the torch
// formula, and the errors the dispatch point throws.
#include <omp.h>

#include <Random123/philox.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/vec_math.h"
#include "kernels/keyed_checksum.h"
#include "kernels/ops.h"
#include "tests/host_context.h"
#include "tests/kernels_test_support.h"

namespace rlcpp {
namespace {

using testing::host;

using testing::check_gradient;
using testing::error_of;
using testing::expect_near_all;
using testing::filled;
using testing::Guarded;
using testing::int_tensor;
using testing::Rng;
using testing::values_of;
using testing::weighted_sum;

constexpr double kAbs = 1e-5;
constexpr double kRel = 1e-5;

// ---------------------------------------------------------------- matmul

// op(x)[r][c] of a row-major matrix stored as rows x cols.
double op_at(const Tensor& x, bool trans, int64_t r, int64_t c) {
  return trans ? x.data<float>()[c * x.size(1) + r] : x.data<float>()[r * x.size(1) + c];
}

TEST(Matmul, MatchesNaiveLoopForAllTransposes) {
  Rng rng(1);
  const int64_t m = 7, n = 5, k = 12;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "trans_a=" << ta << " trans_b=" << tb);
      Tensor a = rng.normal(ta ? Shape{k, m} : Shape{m, k});
      Tensor b = rng.normal(tb ? Shape{n, k} : Shape{k, n});
      Tensor c = rng.normal({m, n});
      std::vector<double> expected(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0.0;
          for (int64_t l = 0; l < k; ++l) s += op_at(a, ta, i, l) * op_at(b, tb, l, j);
          expected[static_cast<size_t>(i * n + j)] = 0.5 * s + 0.25 * c.data<float>()[i * n + j];
        }
      ops::matmul(host(), a, ta, b, tb, c, 0.5f, 0.25f);
      expect_near_all(c, expected, kAbs, kRel, "c");
    }
  }
}

TEST(Matmul, BackwardByMatmulMatchesFiniteDifferences) {
  // With c = op(a) @ op(b): dop(a) = dc @ op(b)^T and dop(b) = op(a)^T @ dc, transposed back when the operand
  // is stored transposed. This checks the four matmul calls the model's linear backward is built from.
  Rng rng(2);
  const int64_t m = 7, n = 5, k = 6;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "trans_a=" << ta << " trans_b=" << tb);
      Tensor a = rng.normal(ta ? Shape{k, m} : Shape{m, k});
      Tensor b = rng.normal(tb ? Shape{n, k} : Shape{k, n});
      Tensor dc = rng.normal({m, n});
      Tensor c = Tensor::empty({m, n});
      auto objective = [&] {
        ops::matmul(host(), a, ta, b, tb, c);
        return weighted_sum(dc, c);
      };
      Tensor da = Tensor::empty(a.shape());
      Tensor db = Tensor::empty(b.shape());
      if (!ta)
        ops::matmul(host(), dc, false, b, !tb, da);
      else
        ops::matmul(host(), b, tb, dc, true, da);
      if (!tb)
        ops::matmul(host(), a, !ta, dc, false, db);
      else
        ops::matmul(host(), dc, true, a, ta, db);
      EXPECT_GRAD_OK(check_gradient(a, values_of(da), objective), "da");
      EXPECT_GRAD_OK(check_gradient(b, values_of(db), objective), "db");
    }
  }
}

TEST(Matmul, MismatchedInnerDimensionNamesTheSizes) {
  Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({5, 6}), c = Tensor::zeros({3, 6});
  const std::string msg = error_of([&] { ops::matmul(host(), a, false, b, false, c); });
  EXPECT_ERROR_MENTIONS(msg, "matmul: a (3, 4) and b (5, 6) do not agree on K");
  Tensor c_bad = Tensor::zeros({3, 5});
  Tensor b_ok = Tensor::zeros({4, 6});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::matmul(host(), a, false, b_ok, false, c_bad); }),
                        "matmul: c has shape (3, 5)");
}

// ---------------------------------------------------------------- elementwise

TEST(Elementwise, BiasAddAndBackwardMatchLoopsAndAccumulate) {
  Rng rng(3);
  const int64_t m = 7, n = 12;
  Tensor y = rng.normal({m, n});
  Tensor bias = rng.normal({n});
  std::vector<double> expected(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m * n; ++i) expected[static_cast<size_t>(i)] = y.data<float>()[i] + bias.data<float>()[i % n];
  ops::add_bias(host(), y, bias);
  expect_near_all(y, expected, kAbs, kRel, "y");

  // dbias accumulates: start from a prior value and check the increment against finite differences.
  Tensor x = rng.normal({m, n});
  Tensor dy = rng.normal({m, n});
  Tensor prior = rng.normal({n});
  Tensor dbias = prior.clone();
  ops::bias_backward(host(), dy, dbias);
  std::vector<float> increment(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) increment[static_cast<size_t>(j)] = dbias.data<float>()[j] - prior.data<float>()[j];
  Tensor out = Tensor::empty({m, n});
  auto objective = [&] {
    std::memcpy(out.data<float>(), x.data<float>(), x.nbytes());
    ops::add_bias(host(), out, bias);
    return weighted_sum(dy, out);
  };
  EXPECT_GRAD_OK(check_gradient(bias, increment, objective), "dbias");
}

TEST(Elementwise, AddScaleNormAndFiniteness) {
  Rng rng(4);
  Tensor x = rng.normal({5, 7});
  Tensor y = rng.normal({5, 7});
  std::vector<double> expected(35);
  double sq = 0.0;
  for (int64_t i = 0; i < 35; ++i) {
    expected[static_cast<size_t>(i)] = (static_cast<double>(x.data<float>()[i]) + y.data<float>()[i]) * -1.5;
    sq += expected[static_cast<size_t>(i)] * expected[static_cast<size_t>(i)];
  }
  ops::add_inplace(host(), x, y);
  ops::scale_inplace(host(), x, -1.5f);
  expect_near_all(x, expected, kAbs, kRel, "x");
  EXPECT_NEAR(ops::l2_norm(host(), x), std::sqrt(sq), 1e-5 * std::sqrt(sq));

  EXPECT_TRUE(ops::all_finite(host(), x));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), std::nanf("")}) {
    Tensor z = x.clone();
    z.data<float>()[33] = bad;
    EXPECT_FALSE(ops::all_finite(host(), z)) << bad;
  }
}

TEST(Elementwise, KeyedChecksumSeesEveryBitAndEveryPosition) {
  // The checksum of the cuda-ipc weight sync: the sum modulo 2^64 of a Philox-4x32-10 draw per element, keyed by
  // the element's index and counting its bits. Checked against the draws computed here from Random123 itself, on
  // a size past the parallel threshold (so the threads' shares are summed too); then a flipped low bit, a -0.0
  // for a +0.0 and two values swapped each change it.
  Rng rng(6);
  Tensor x = rng.normal({100003});
  x.data<float>()[17] = 0.0f;
  uint64_t want = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    r123::Philox4x32 philox;
    const r123::Philox4x32::key_type key = {{static_cast<uint32_t>(kKeyedChecksumSeed),
                                             static_cast<uint32_t>(kKeyedChecksumSeed >> 32)}};
    const r123::Philox4x32::ctr_type ctr = {{static_cast<uint32_t>(i), 0u, std::bit_cast<uint32_t>(x.data<float>()[i]), 0u}};
    const r123::Philox4x32::ctr_type d = philox(ctr, key);
    want += (static_cast<uint64_t>(d[1]) << 32) | d[0];
  }
  const uint64_t sum = ops::keyed_checksum(host(), x);
  EXPECT_EQ(sum, want);
  Tensor flipped = x.clone();
  flipped.data<float>()[99999] = std::bit_cast<float>(std::bit_cast<uint32_t>(flipped.data<float>()[99999]) ^ 1u);
  EXPECT_NE(ops::keyed_checksum(host(), flipped), sum);
  Tensor negative_zero = x.clone();
  negative_zero.data<float>()[17] = -0.0f;
  EXPECT_NE(ops::keyed_checksum(host(), negative_zero), sum);
  Tensor swapped = x.clone();
  std::swap(swapped.data<float>()[3], swapped.data<float>()[50000]);
  EXPECT_NE(ops::keyed_checksum(host(), swapped), sum);
  EXPECT_EQ(ops::keyed_checksum(host(), Tensor::empty({0})), 0u);
}

TEST(Elementwise, LargeReductionsDoNotDependOnThreadCount) {
  // Past the parallel threshold the column and chunk splits must still sum in one fixed order.
  Rng rng(5);
  Tensor dy = rng.normal({3001, 37});
  Tensor big = rng.normal({200003});
  Tensor dbias1 = Tensor::zeros({37}), dbias2 = Tensor::zeros({37});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ops::bias_backward(host(), dy, dbias1);
  const double norm1 = ops::l2_norm(host(), big);
  omp_set_num_threads(std::max(2, threads));
  ops::bias_backward(host(), dy, dbias2);
  const double norm2 = ops::l2_norm(host(), big);
  omp_set_num_threads(threads);
  EXPECT_TRUE(testing::same_bits(dbias1.data<float>(), dbias2.data<float>(), 37));
  EXPECT_EQ(norm1, norm2);
  double sq = 0.0;
  for (int64_t i = 0; i < big.numel(); ++i) sq += static_cast<double>(big.data<float>()[i]) * big.data<float>()[i];
  EXPECT_NEAR(norm1, std::sqrt(sq), 1e-12 * std::sqrt(sq));
}

// ---------------------------------------------------------------- embedding

TEST(Embedding, LooksUpRowsAndScatterAddsGradients) {
  Rng rng(6);
  const int64_t v = 17, c = 12;
  Tensor table = rng.normal({v, c});
  Tensor ids = int_tensor({3, 0, 16, 3, 9, 3, 1});  // repeats must add up
  Guarded out({7, c});
  ops::embedding_forward(host(), table, ids, out.t());
  std::vector<double> expected;
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < c; ++j) expected.push_back(table.data<float>()[ids.data<int32_t>()[i] * c + j]);
  expect_near_all(out.t(), expected, 0.0, 0.0, "out");
  EXPECT_TRUE(out.guards_intact());

  Tensor dout = rng.normal({7, c});
  Tensor prior = rng.normal({v, c});
  Tensor dtable = prior.clone();
  ops::embedding_backward(host(), dout, ids, dtable);
  std::vector<float> increment(static_cast<size_t>(v * c));
  for (int64_t i = 0; i < v * c; ++i)
    increment[static_cast<size_t>(i)] = dtable.data<float>()[i] - prior.data<float>()[i];
  Tensor tmp = Tensor::empty({7, c});
  auto objective = [&] {
    ops::embedding_forward(host(), table, ids, tmp);
    return weighted_sum(dout, tmp);
  };
  EXPECT_GRAD_OK(check_gradient(table, increment, objective), "dtable");
}

TEST(Embedding, OutOfRangeIdNamesIdAndIndex) {
  Tensor table = Tensor::zeros({17, 4});
  Tensor out = Tensor::zeros({3, 4});
  Tensor ids = int_tensor({1, 17, 2});
  const std::string msg = error_of([&] { ops::embedding_forward(host(), table, ids, out); });
  EXPECT_ERROR_MENTIONS(msg, "embedding_forward: ids[1] = 17 is outside [0, 17)");
}

// ---------------------------------------------------------------- rmsnorm

TEST(RmsNorm, ForwardMatchesHuggingFaceFormula) {
  Rng rng(7);
  // Rows go in groups of eight and columns in lanes of eight: a partial group, then whole groups plus a part
  // with a column tail.
  for (const auto& [n, c] : {std::pair<int64_t, int64_t>{7, 12}, {19, 130}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " c=" << c);
    const float eps = 1e-5f;
    Tensor x = rng.normal({n, c});
    Tensor w = rng.normal({c});
    Guarded out({n, c}), rstd({n});
    ops::rmsnorm_forward(host(), x, w, eps, out.t(), rstd.t());
    std::vector<double> expected, expected_rstd;
    for (int64_t i = 0; i < n; ++i) {
      double ms = 0.0;
      for (int64_t j = 0; j < c; ++j) ms += static_cast<double>(x.data<float>()[i * c + j]) * x.data<float>()[i * c + j];
      const double r = 1.0 / std::sqrt(ms / c + eps);
      expected_rstd.push_back(r);
      for (int64_t j = 0; j < c; ++j) expected.push_back(x.data<float>()[i * c + j] * r * w.data<float>()[j]);
  }
  expect_near_all(out.t(), expected, kAbs, kRel, "out");
  expect_near_all(rstd.t(), expected_rstd, kAbs, kRel, "rstd");
  EXPECT_TRUE(out.guards_intact());
  EXPECT_TRUE(rstd.guards_intact());
  }
}

// A row's output is the same bits whatever rows share the call (the decode and the training forward rely on it).
TEST(RmsNorm, RowResultsDoNotDependOnTheBatch) {
  Rng rng(17);
  const int64_t n = 19, c = 130;
  Tensor x = rng.normal({n, c}), w = rng.normal({c}), out = Tensor::empty({n, c}), rstd = Tensor::empty({n});
  ops::rmsnorm_forward(host(), x, w, 1e-5f, out, rstd);
  for (int64_t i = 0; i < n; i += 3) {
    Tensor one = Tensor::empty({1, c}), one_rstd = Tensor::empty({1});
    ops::rmsnorm_forward(host(), x.slice_rows(i, i + 1), w, 1e-5f, one, one_rstd);
    EXPECT_EQ(std::memcmp(one.data<float>(), out.data<float>() + i * c, c * sizeof(float)), 0) << "row " << i;
    EXPECT_EQ(std::memcmp(one_rstd.data<float>(), rstd.data<float>() + i, sizeof(float)), 0) << "row " << i;
  }
}

// Runs rmsnorm_backward into guarded dx/dweight pre-filled with prior values; returns the increments.
struct RmsNormGrads {
  std::vector<float> dx, dweight;
  bool guards_intact;
};
RmsNormGrads rmsnorm_increments(Rng& rng, const Tensor& dout, const Tensor& x, const Tensor& w, float eps) {
  const int64_t n = x.size(0), c = x.size(1);
  Tensor out = Tensor::empty({n, c}), rstd = Tensor::empty({n});
  ops::rmsnorm_forward(host(), x, w, eps, out, rstd);
  Tensor dx_prior = rng.normal({n, c}), dw_prior = rng.normal({c});
  Guarded dx({n, c}), dw({c});
  dx.copy_from(dx_prior);
  dw.copy_from(dw_prior);
  ops::rmsnorm_backward(host(), dout, x, w, rstd, dx.t(), dw.t());
  RmsNormGrads g{values_of(dx.t()), values_of(dw.t()), dx.guards_intact() && dw.guards_intact()};
  for (int64_t i = 0; i < n * c; ++i) g.dx[static_cast<size_t>(i)] -= dx_prior.data<float>()[i];
  for (int64_t j = 0; j < c; ++j) g.dweight[static_cast<size_t>(j)] -= dw_prior.data<float>()[j];
  return g;
}

TEST(RmsNorm, BackwardAccumulatesFiniteDifferenceGradients) {
  Rng rng(8);
  for (const auto& [n, c] : {std::pair<int64_t, int64_t>{7, 12}, {19, 21}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " c=" << c);
    const float eps = 1e-5f;
    Tensor x = rng.normal({n, c});
    Tensor w = rng.normal({c});
    Tensor dout = rng.normal({n, c});
    const RmsNormGrads g = rmsnorm_increments(rng, dout, x, w, eps);
    EXPECT_TRUE(g.guards_intact);
    Tensor out = Tensor::empty({n, c}), rstd = Tensor::empty({n});
    auto objective = [&] {
      ops::rmsnorm_forward(host(), x, w, eps, out, rstd);
      return weighted_sum(dout, out);
    };
    EXPECT_GRAD_OK(check_gradient(x, g.dx, objective), "dx");
    EXPECT_GRAD_OK(check_gradient(w, g.dweight, objective), "dweight");
  }
}

TEST(RmsNorm, BackwardDoesNotDependOnThreadCount) {
  Rng rng(9);
  const int64_t n = 700, c = 128;
  Tensor x = rng.normal({n, c}), w = rng.normal({c}), dout = rng.normal({n, c});
  Tensor out = Tensor::empty({n, c}), rstd = Tensor::empty({n});
  ops::rmsnorm_forward(host(), x, w, 1e-5f, out, rstd);
  Tensor dx1 = Tensor::zeros({n, c}), dw1 = Tensor::zeros({c}), dx2 = Tensor::zeros({n, c}), dw2 = Tensor::zeros({c});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ops::rmsnorm_backward(host(), dout, x, w, rstd, dx1, dw1);
  omp_set_num_threads(std::max(2, threads));
  ops::rmsnorm_backward(host(), dout, x, w, rstd, dx2, dw2);
  omp_set_num_threads(threads);
  EXPECT_TRUE(testing::same_bits(dx1.data<float>(), dx2.data<float>(), n * c));
  EXPECT_TRUE(testing::same_bits(dw1.data<float>(), dw2.data<float>(), c));
}

// ---------------------------------------------------------------- rope

TEST(Rope, TableFollowsHuggingFaceFloatComputation) {
  const int64_t positions = 64, d = 32;
  const float theta = 10000.0f;
  Tensor table = ops::rope_table(host(), positions, d, theta);
  ASSERT_EQ(table.shape(), (Shape{positions, d}));
  std::vector<double> expected(static_cast<size_t>(positions * d));
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < d / 2; ++i) {
      // inv_freq and the angle in float as transformers does; cos/sin in double, so only their rounding differs.
      const float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(d));
      const double angle = static_cast<float>(p) * inv_freq;
      expected[static_cast<size_t>(p * d + i)] = std::cos(angle);
      expected[static_cast<size_t>(p * d + d / 2 + i)] = std::sin(angle);
    }
  expect_near_all(table, expected, 1e-6, 0.0, "table");
  // Position 0 is the identity rotation.
  for (int64_t i = 0; i < d / 2; ++i) {
    EXPECT_EQ(table.data<float>()[i], 1.0f);
    EXPECT_EQ(table.data<float>()[d / 2 + i], 0.0f);
  }
}

TEST(Rope, ForwardRotatesHalvesAndBackwardIsItsTranspose) {
  Rng rng(10);
  const int64_t n = 7, h = 3, d = 10;
  Tensor table = ops::rope_table(host(), 20, d, 500.0f);
  Tensor positions = int_tensor({0, 5, 19, 3, 3, 11, 7});
  Tensor x = rng.normal({n, h, d});
  std::vector<double> expected(static_cast<size_t>(n * h * d));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t j = 0; j < d / 2; ++j) {
        const float* row = table.data<float>() + positions.data<int32_t>()[i] * d;
        const float* xr = x.data<float>() + (i * h + hh) * d;
        const double c = row[j], s = row[d / 2 + j];
        expected[static_cast<size_t>((i * h + hh) * d + j)] = xr[j] * c - xr[j + d / 2] * s;
        expected[static_cast<size_t>((i * h + hh) * d + j + d / 2)] = xr[j + d / 2] * c + xr[j] * s;
      }
  Tensor y = x.clone();
  ops::rope_forward(host(), y, positions, table);
  expect_near_all(y, expected, kAbs, kRel, "rope(x)");

  Tensor dout = rng.normal({n, h, d});
  Tensor dx = dout.clone();
  ops::rope_backward(host(), dx, positions, table);
  Tensor tmp = Tensor::empty({n, h, d});
  auto objective = [&] {
    std::memcpy(tmp.data<float>(), x.data<float>(), x.nbytes());
    ops::rope_forward(host(), tmp, positions, table);
    return weighted_sum(dout, tmp);
  };
  EXPECT_GRAD_OK(check_gradient(x, values_of(dx), objective), "dx");
}

TEST(Rope, PositionPastTableIsAnError) {
  Tensor table = ops::rope_table(host(), 8, 4, 10000.0f);
  Tensor x = Tensor::zeros({2, 1, 4});
  Tensor positions = int_tensor({7, 8});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::rope_forward(host(), x, positions, table); }),
                        "rope_forward: positions[1] = 8 is outside [0, 8)");
}

// The fused qkv split + RoPE (forward) and RoPE backward + merge: the same bits as the separate steps.
TEST(Rope, SplitAndMergeOfTheFusedQkvEqualTheSeparateSteps) {
  Rng rng(19);
  const int64_t n = 11, hq = 4, hkv = 2, d = 6, qd = hq * d, kd = hkv * d, row = qd + 2 * kd;
  Tensor table = ops::rope_table(host(), 16, d, 10000.0f);
  std::vector<int32_t> pos_values;
  for (int64_t i = 0; i < n; ++i) pos_values.push_back(static_cast<int32_t>((i * 5) % 16));
  Tensor positions = int_tensor(pos_values);
  Tensor qkv = rng.normal({n, row});
  // Separately: copy the blocks out, rotate q and k in place.
  Tensor q0 = Tensor::empty({n, hq, d}), k0 = Tensor::empty({n, hkv, d}), v0 = Tensor::empty({n, hkv, d});
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(q0.data<float>() + i * qd, qkv.data<float>() + i * row, qd * sizeof(float));
    std::memcpy(k0.data<float>() + i * kd, qkv.data<float>() + i * row + qd, kd * sizeof(float));
    std::memcpy(v0.data<float>() + i * kd, qkv.data<float>() + i * row + qd + kd, kd * sizeof(float));
  }
  ops::rope_forward(host(), q0, positions, table);
  ops::rope_forward(host(), k0, positions, table);
  Guarded q({n, hq, d}), k({n, hkv, d}), v({n, hkv, d});
  ops::rope_split_qkv(host(), qkv, positions, table, q.t(), k.t(), v.t());
  EXPECT_TRUE(q.guards_intact() && k.guards_intact() && v.guards_intact());
  EXPECT_EQ(std::memcmp(q.data(), q0.data<float>(), q0.nbytes()), 0);
  EXPECT_EQ(std::memcmp(k.data(), k0.data<float>(), k0.nbytes()), 0);
  EXPECT_EQ(std::memcmp(v.data(), v0.data<float>(), v0.nbytes()), 0);

  Tensor dq = rng.normal({n, hq, d}), dk = rng.normal({n, hkv, d}), dv = rng.normal({n, hkv, d});
  Guarded dqkv({n, row});
  ops::rope_backward_merge_qkv(host(), dq, dk, dv, positions, table, dqkv.t());
  EXPECT_TRUE(dqkv.guards_intact());
  ops::rope_backward(host(), dq, positions, table);
  ops::rope_backward(host(), dk, positions, table);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(std::memcmp(dqkv.data() + i * row, dq.data<float>() + i * qd, qd * sizeof(float)), 0) << "row " << i;
    EXPECT_EQ(std::memcmp(dqkv.data() + i * row + qd, dk.data<float>() + i * kd, kd * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(dqkv.data() + i * row + qd + kd, dv.data<float>() + i * kd, kd * sizeof(float)), 0);
  }

  Tensor bad = Tensor::empty({n, row + 1});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::rope_split_qkv(host(), bad, positions, table, q.t(), k.t(), v.t()); }),
                        "rope_split_qkv: qkv has shape");
  Tensor far = int_tensor(std::vector<int32_t>(static_cast<size_t>(n), 16));
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::rope_backward_merge_qkv(host(), dq, dk, dv, far, table, dqkv.t()); }),
                        "rope_backward_merge_qkv: positions[0] = 16 is outside [0, 16)");
}

// The plain split and merge (no RoPE; Qwen3 normalises q and k between the split and the rotation): the blocks
// of each row, and the split of the merge is the identity.
TEST(Rope, PlainSplitAndMergeOfTheFusedQkvCopyTheBlocks) {
  Rng rng(23);
  const int64_t n = 9, hq = 6, hkv = 2, d = 4, qd = hq * d, kd = hkv * d, row = qd + 2 * kd;
  Tensor qkv = rng.normal({n, row});
  Guarded q({n, hq, d}), k({n, hkv, d}), v({n, hkv, d});
  ops::split_qkv(host(), qkv, q.t(), k.t(), v.t());
  EXPECT_TRUE(q.guards_intact() && k.guards_intact() && v.guards_intact());
  for (int64_t i = 0; i < n; ++i) {
    const float* src = qkv.data<float>() + i * row;
    EXPECT_EQ(std::memcmp(q.data() + i * qd, src, qd * sizeof(float)), 0) << "row " << i;
    EXPECT_EQ(std::memcmp(k.data() + i * kd, src + qd, kd * sizeof(float)), 0) << "row " << i;
    EXPECT_EQ(std::memcmp(v.data() + i * kd, src + qd + kd, kd * sizeof(float)), 0) << "row " << i;
  }
  Guarded back({n, row});
  ops::merge_qkv(host(), q.t(), k.t(), v.t(), back.t());
  EXPECT_TRUE(back.guards_intact());
  EXPECT_EQ(std::memcmp(back.data(), qkv.data<float>(), qkv.nbytes()), 0);

  Tensor bad = Tensor::empty({n, row - d});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::split_qkv(host(), bad, q.t(), k.t(), v.t()); }),
                        "split_qkv: qkv has shape");
  Tensor short_v = Tensor::empty({n, hkv + 1, d});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::merge_qkv(host(), q.t(), k.t(), short_v, back.t()); }),
                        "merge_qkv: dv has shape");
}

// ---------------------------------------------------------------- swiglu

TEST(SwiGlu, ForwardMatchesLoopAndBackwardMatchesFiniteDifferences) {
  Rng rng(11);
  const int64_t n = 7, f = 9;
  Tensor gate_up = rng.normal({n, 2 * f}, 2.0f);
  Guarded out({n, f});
  ops::swiglu_forward(host(), gate_up, out.t());
  std::vector<double> expected;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const double g = gate_up.data<float>()[i * 2 * f + j], u = gate_up.data<float>()[i * 2 * f + f + j];
      expected.push_back(g / (1.0 + std::exp(-g)) * u);
    }
  expect_near_all(out.t(), expected, kAbs, kRel, "out");
  EXPECT_TRUE(out.guards_intact());

  Tensor dout = rng.normal({n, f});
  Guarded dgate_up({n, 2 * f});
  ops::swiglu_backward(host(), dout, gate_up, dgate_up.t());
  EXPECT_TRUE(dgate_up.guards_intact());
  Tensor tmp = Tensor::empty({n, f});
  auto objective = [&] {
    ops::swiglu_forward(host(), gate_up, tmp);
    return weighted_sum(dout, tmp);
  };
  EXPECT_GRAD_OK(check_gradient(gate_up, values_of(dgate_up.t()), objective), "dgate_up");

  // The fused variant: the same dgate_up bits, and act = the forward's output bit for bit (the training
  // backward uses it in place of a stored forward output). Wide rows, so the vector loops run.
  Tensor wide = rng.normal({5, 2 * 301}, 3.0f), dwide = rng.normal({5, 301});
  Tensor act_fwd = Tensor::empty({5, 301}), dg_plain = Tensor::empty({5, 602}), dg_fused = Tensor::empty({5, 602});
  Guarded act({5, 301});
  ops::swiglu_forward(host(), wide, act_fwd);
  ops::swiglu_backward(host(), dwide, wide, dg_plain);
  ops::swiglu_backward(host(), dwide, wide, dg_fused, act.t());
  EXPECT_TRUE(act.guards_intact());
  EXPECT_EQ(std::memcmp(act.data(), act_fwd.data<float>(), act_fwd.nbytes()), 0);
  EXPECT_EQ(std::memcmp(dg_fused.data<float>(), dg_plain.data<float>(), dg_plain.nbytes()), 0);
  Tensor act_bad = Tensor::empty({5, 300});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::swiglu_backward(host(), dwide, wide, dg_fused, act_bad); }), "act");
}

// ---------------------------------------------------------------- logprob

struct LogprobRef {
  std::vector<double> logp, lse, entropy;
};
LogprobRef logprob_reference(const Tensor& logits, const std::vector<int32_t>& targets, double temperature) {
  LogprobRef r;
  const int64_t n = logits.size(0), v = logits.size(1);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits.data<float>() + i * v;
    double m = -INFINITY;
    for (int64_t j = 0; j < v; ++j) m = std::max(m, row[j] / temperature);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] / temperature - m);
    const double lse = m + std::log(sum);
    double h = 0.0;
    for (int64_t j = 0; j < v; ++j) {
      const double lp = row[j] / temperature - lse;
      h -= std::exp(lp) * lp;
    }
    const int32_t t = targets[static_cast<size_t>(i)];
    r.lse.push_back(lse);
    r.logp.push_back(t < 0 ? 0.0 : row[t] / temperature - lse);
    r.entropy.push_back(h);
  }
  return r;
}

TEST(Logprob, ForwardMatchesDoubleReference) {
  Rng rng(12);
  const int64_t n = 7, v = 17;
  const float temperature = 0.7f;
  Tensor logits = rng.normal({n, v}, 3.0f);
  const std::vector<int32_t> target_values = {3, 16, -1, 0, 5, 5, 11};
  Tensor targets = int_tensor(target_values);
  Guarded logp({n}), lse({n}), entropy({n});
  ops::logprob_forward(host(), logits, targets, temperature, logp.t(), lse.t(), &entropy.t());
  const LogprobRef ref = logprob_reference(logits, target_values, temperature);
  expect_near_all(logp.t(), ref.logp, kAbs, kRel, "logp");
  expect_near_all(lse.t(), ref.lse, kAbs, kRel, "lse");
  expect_near_all(entropy.t(), ref.entropy, kAbs, kRel, "entropy");
  EXPECT_EQ(logp.data()[2], 0.0f);
  EXPECT_TRUE(logp.guards_intact() && lse.guards_intact() && entropy.guards_intact());
}

TEST(Logprob, BackwardMatchesFiniteDifferencesWithAndWithoutEntropy) {
  Rng rng(13);
  const int64_t n = 7, v = 17;
  const float temperature = 0.7f;
  Tensor logits = rng.normal({n, v}, 2.0f);
  Tensor targets = int_tensor({3, 16, -1, 0, 5, 5, 11});  // row 2 has no target: entropy term only
  Tensor dlogp = rng.normal({n});
  Tensor dentropy = rng.normal({n});
  for (bool with_entropy : {false, true}) {
    SCOPED_TRACE(with_entropy ? "with entropy" : "logp only");
    Tensor logp = Tensor::empty({n}), lse = Tensor::empty({n}), entropy = Tensor::empty({n});
    ops::logprob_forward(host(), logits, targets, temperature, logp, lse, with_entropy ? &entropy : nullptr);
    Guarded dlogits({n, v});
    ops::logprob_backward(host(), dlogp, with_entropy ? &dentropy : nullptr, logits, targets, temperature, lse,
                          dlogits.t());
    EXPECT_TRUE(dlogits.guards_intact());
    auto objective = [&] {
      ops::logprob_forward(host(), logits, targets, temperature, logp, lse, with_entropy ? &entropy : nullptr);
      return weighted_sum(dlogp, logp) + (with_entropy ? weighted_sum(dentropy, entropy) : 0.0);
    };
    EXPECT_GRAD_OK(check_gradient(logits, values_of(dlogits.t()), objective), "dlogits");
    // Without entropy, the row with no target has no gradient at all.
    if (!with_entropy)
      for (int64_t j = 0; j < v; ++j) EXPECT_EQ(dlogits.data()[2 * v + j], 0.0f);
  }
}

TEST(Logprob, TargetOutsideVocabularyNamesTheRow) {
  Tensor logits = Tensor::zeros({3, 17});
  Tensor logp = Tensor::empty({3}), lse = Tensor::empty({3});
  Tensor targets = int_tensor({0, -1, 17});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::logprob_forward(host(), logits, targets, 1.0f, logp, lse, nullptr); }),
                        "logprob_forward: target 17 at row 2");
  Tensor targets2 = int_tensor({0, -2, 1});
  Tensor dlogits = Tensor::empty({3, 17});
  EXPECT_ERROR_MENTIONS(
      error_of([&] { ops::logprob_backward(host(), lse, nullptr, logits, targets2, 1.0f, lse, dlogits); }),
      "logprob_backward: target -2 at row 1");
}

// ---------------------------------------------------------------- adamw

TEST(AdamW, FiveStepsMatchTorchFormulaInDouble) {
  Rng rng(14);
  const int64_t n = 37;
  const ops::AdamWParams hp{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  Tensor param = rng.normal({n});
  Tensor m = Tensor::zeros({n}), v = Tensor::zeros({n});
  const std::vector<float> p0 = values_of(param);
  std::vector<double> p_ref(p0.begin(), p0.end());
  std::vector<double> m_ref(static_cast<size_t>(n), 0.0), v_ref(static_cast<size_t>(n), 0.0);
  for (int64_t step = 1; step <= 5; ++step) {
    Tensor grad = rng.normal({n});
    grad.data<float>()[0] = 0.0f;  // a zero gradient: the update is decay only until m picks something up
    ops::adamw_step(host(), param, grad, m, v, hp, step);
    // torch.optim.AdamW: decoupled decay, then moments, then the bias-corrected step.
    const double lr = hp.lr, b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps, wd = hp.weight_decay;
    const double bc1 = 1.0 - std::pow(b1, step), bc2 = 1.0 - std::pow(b2, step);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const double g = grad.data<float>()[i];
      p_ref[k] *= 1.0 - lr * wd;
      m_ref[k] = b1 * m_ref[k] + (1.0 - b1) * g;
      v_ref[k] = b2 * v_ref[k] + (1.0 - b2) * g * g;
      p_ref[k] -= lr / bc1 * m_ref[k] / (std::sqrt(v_ref[k]) / std::sqrt(bc2) + eps);
    }
  }
  expect_near_all(param, p_ref, 1e-6, 1e-6, "param");
  expect_near_all(m, m_ref, 1e-7, 1e-5, "m");
  expect_near_all(v, v_ref, 1e-9, 1e-5, "v");
}

// ---------------------------------------------------------------- vectorisable exp

TEST(VecMath, ExpFixedWithinTwoUlpWithExactLimits) {
  // Every kernel that exponentiates (softmax, entropy, SwiGLU) goes through exp_fixed.
  double worst = 0.0;
  for (int i = 0; i <= 400000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 400000.0f;
    const double expected = std::exp(static_cast<double>(x));
    const double rel = std::abs(static_cast<double>(cpu::exp_fixed(x)) - expected) / expected;
    worst = std::isnan(rel) ? rel : std::max(worst, rel);
  }
  EXPECT_LE(worst, 2.0 * 1.1920929e-7) << "2 ulp of 1.0f";
  EXPECT_EQ(cpu::exp_fixed(0.0f), 1.0f);
  EXPECT_EQ(cpu::exp_fixed(-INFINITY), 0.0f);
  EXPECT_EQ(cpu::exp_fixed(-104.0f), 0.0f);
  EXPECT_EQ(cpu::exp_fixed(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(cpu::exp_fixed(std::nanf(""))));
}

// ---------------------------------------------------------------- dispatch errors

TEST(Dispatch, ShapeErrorsNameTheOp) {
  Tensor x = Tensor::zeros({4, 6}), w = Tensor::zeros({5}), out = Tensor::zeros({4, 6}), rstd = Tensor::zeros({4});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::rmsnorm_forward(host(), x, w, 1e-5f, out, rstd); }),
                        "rmsnorm_forward: weight has shape (5) but expected (6)");
  Tensor y = Tensor::zeros({4, 5});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::add_inplace(host(), x, y); }), "add_inplace: y has shape (4, 5)");
  Tensor bias = Tensor::zeros({7});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::add_bias(host(), x, bias); }), "add_bias: bias has shape (7)");
  Tensor gate_up = Tensor::zeros({4, 7}), sw = Tensor::zeros({4, 3});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::swiglu_forward(host(), gate_up, sw); }), "swiglu_forward: gate_up (4, 7)");
  Tensor grad = Tensor::zeros({4, 6}), m = Tensor::zeros({4, 6}), v = Tensor::zeros({6});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::adamw_step(host(), x, grad, m, v, {}, 1); }),
                        "adamw_step: v has shape (6)");
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::adamw_step(host(), x, grad, m, m, {}, 0); }), "adamw_step: step = 0");
  Tensor ids64 = Tensor::zeros({4}, DType::kI64), table = Tensor::zeros({3, 6});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::embedding_forward(host(), table, ids64, out); }),
                        "embedding_forward: ids must be I32, got I64");
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::rope_table(host(), 8, 5, 1e4f); }), "rope_table: head_dim = 5");
}

TEST(Dispatch, UnsupportedDtypeAndDeviceAreNamed) {
  Tensor bf = Tensor::zeros({4, 6}, DType::kBF16);
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::scale_inplace(host(), bf, 2.0f); }),
                        "op scale_inplace: dtype BF16 not supported on cpu");
  float dummy[4] = {};
  Tensor on_cuda = Tensor::borrow(dummy, {4}, DType::kF32, Device::kCUDA);
  Tensor on_cpu = Tensor::zeros({4});
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::add_inplace(host(), on_cpu, on_cuda); }),
                        "add_inplace: y is on cuda but the op runs on cpu");
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::scale_inplace(host(), on_cuda, 2.0f); }),
                        "scale_inplace: x is on cuda but the op runs on cpu");
  Tensor undefined;
  EXPECT_ERROR_MENTIONS(error_of([&] { ops::l2_norm(host(), undefined); }), "l2_norm: x is an undefined tensor");
}

TEST(Dispatch, MatmulMathOtherThanF32IsRefusedByTheCpuBackend) {
  // Tensor-core math (tf32, bf16, fp16 operands) is CUDA's: the CPU backend says it does not run that pair.
  Rng rng(45);
  const Tensor a = rng.normal({3, 4}), b = rng.normal({4, 5});
  Tensor c = Tensor::empty({3, 5});
  EXPECT_ERROR_MENTIONS(
      error_of([&] { ops::matmul(host(), a, false, b, false, c, 1.0f, 0.0f, DType::kBF16); }),
      "op matmul: bf16 not supported on the cpu backend (cpu)");
}

// ---------------------------------------------------------------- the gradient checker itself

TEST(GradCheck, RejectsWrongSignAndFivePercentErrors) {
  // The finite-difference tests above are only worth their tolerance if a plausible bug fails them.
  Rng rng(15);
  const int64_t n = 5, c = 8;
  Tensor x = rng.normal({n, c}), w = rng.normal({c}), dout = rng.normal({n, c});
  const RmsNormGrads g = rmsnorm_increments(rng, dout, x, w, 1e-5f);
  Tensor out = Tensor::empty({n, c}), rstd = Tensor::empty({n});
  auto objective = [&] {
    ops::rmsnorm_forward(host(), x, w, 1e-5f, out, rstd);
    return weighted_sum(dout, out);
  };
  EXPECT_TRUE(testing::gradient_ok(check_gradient(x, g.dx, objective)));
  std::vector<float> negated = g.dx;
  for (float& e : negated) e = -e;
  EXPECT_FALSE(testing::gradient_ok(check_gradient(x, negated, objective)));
  std::vector<float> off = g.dx;
  const auto largest = std::max_element(off.begin(), off.end(), [](float a, float b) { return std::abs(a) < std::abs(b); });
  *largest *= 1.05f;
  EXPECT_FALSE(testing::gradient_ok(check_gradient(x, off, objective)));
  std::vector<float> with_nan = g.dx;
  with_nan[3] = std::nanf("");
  EXPECT_FALSE(testing::gradient_ok(check_gradient(x, with_nan, objective)));
}

}  // namespace
}  // namespace rlcpp
