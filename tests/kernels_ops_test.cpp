// CPU fp32 ops of kernels/ops.h (all but attention, see kernels_attention_test.cpp): forwards against naive
// double-precision loops, every backward against central differences, guard bytes, AdamW against the torch
// formula, and the errors the dispatch point throws.
#include <omp.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/exec_context.h"
#include "kernels/cpu/dtype_round.h"
#include "kernels/cpu/vec_math.h"
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

TEST(Dispatch, CudaOpsRunOnTensorsFromACudaContext) {
  // Device tensors come from an ExecContext's pool; the ops' CUDA arm takes them and agrees with the CPU
  // reference (fp32: a sum exactly, a product to fp32 rounding of a different summation order).
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  Rng rng(31);
  const Tensor x = rng.normal({17, 54}), y = rng.normal({17, 54}), w = rng.normal({12, 54});
  Tensor dx = gpu.copy_of(x);
  const Tensor dy = gpu.copy_of(y), dw = gpu.copy_of(w);
  ops::add_inplace(gpu, dx, dy);
  Tensor sum = x.clone(), sum_back = Tensor::empty(x.shape());
  ops::add_inplace(host(), sum, y);
  gpu.copy(dx, sum_back);
  EXPECT_EQ(std::memcmp(sum_back.raw(), sum.raw(), sum.nbytes()), 0);
  Tensor prod = Tensor::empty({17, 12}), prod_back = Tensor::empty({17, 12});
  Tensor dprod = gpu.empty({17, 12});
  ops::matmul(gpu, dx.reshape({17, 54}), false, dw, true, dprod);
  ops::matmul(host(), sum, false, w, true, prod);
  gpu.copy(dprod, prod_back);
  for (int64_t i = 0; i < prod.numel(); ++i) {
    const float want = prod.data<float>()[i];
    EXPECT_NEAR(prod_back.data<float>()[i], want, 1e-4 * (1 + std::fabs(want))) << i;
  }
}

TEST(Dispatch, CudaLogprobsMatchTheCpuReference) {
  // logprob_forward (log-prob, lse, entropy) and logprob_backward (with an entropy term) on CUDA against the CPU
  // reference on odd sizes, rows without a target among them, the device outputs poisoned with NaN first.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  Rng rng(41);
  const float temperature = 0.7f;
  auto poisoned = [&](const Shape& shape) {
    Tensor nan = Tensor::empty(shape);
    for (int64_t i = 0; i < nan.numel(); ++i) nan.data<float>()[i] = std::nanf("");
    return gpu.copy_of(nan);
  };
  auto expect_close = [&](const Tensor& device, const Tensor& want, const char* what) {
    Tensor got = Tensor::empty(want.shape());
    gpu.copy(device, got);
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float w = want.data<float>()[i];
      ASSERT_NEAR(got.data<float>()[i], w, 2e-5f * (1.0f + std::fabs(w))) << what << " " << i;
    }
  };
  for (const int64_t vocab : {12, 17, 97, 1000}) {
    for (const int64_t n : {1, 17, 54}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " vocab=" << vocab);
      const Tensor logits = rng.normal({n, vocab}, 3.0f), dlogp = rng.normal({n}), dent = rng.normal({n});
      Tensor targets = Tensor::empty({n}, DType::kI32);
      for (int64_t i = 0; i < n; ++i)
        targets.data<int32_t>()[i] = i % 5 == 3 ? -1 : static_cast<int32_t>(i * 7919 % vocab);
      Tensor logp = Tensor::empty({n}), lse = Tensor::empty({n}), ent = Tensor::empty({n});
      Tensor dlogits = Tensor::empty({n, vocab});
      ops::logprob_forward(host(), logits, targets, temperature, logp, lse, &ent);
      ops::logprob_backward(host(), dlogp, &dent, logits, targets, temperature, lse, dlogits);
      const Tensor d_logits = gpu.copy_of(logits), d_targets = gpu.copy_of(targets);
      const Tensor d_dlogp = gpu.copy_of(dlogp), d_dent = gpu.copy_of(dent);
      Tensor d_logp = poisoned({n}), d_lse = poisoned({n}), d_ent = poisoned({n}), d_dlogits = poisoned({n, vocab});
      ops::logprob_forward(gpu, d_logits, d_targets, temperature, d_logp, d_lse, &d_ent);
      ops::logprob_backward(gpu, d_dlogp, &d_dent, d_logits, d_targets, temperature, d_lse, d_dlogits);
      expect_close(d_logp, logp, "logp");
      expect_close(d_lse, lse, "lse");
      expect_close(d_ent, ent, "entropy");
      expect_close(d_dlogits, dlogits, "dlogits");
    }
  }
}

TEST(Dispatch, CudaRoundToGivesTheCpuBits) {
  // round_to on the device rounds as the CPU does, bit for bit: ties either way, overflow to inf, subnormals of
  // both formats, and NaNs with payloads (kept, quieted) among random values of many scales.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7FC00001u,
                              0xFFA00123u, 0x7F800001u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000001u, 0x807FFFFFu,
                              0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F801000u, 0x3F803000u, 0x3F801001u,
                              0x477FE000u, 0x477FF000u, 0x477FEFFFu, 0x33800000u, 0x33000000u, 0x38800000u};
  Rng rng(43);
  Tensor x = rng.normal({1031});
  const float scales[] = {1.0f, 1e-30f, 1e-6f, 3e4f, 1e38f};
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= scales[i % 5];
  for (size_t i = 0; i < std::size(special); ++i) std::memcpy(x.data<float>() + 7 * i, &special[i], sizeof(float));
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Tensor want = x.clone(), got = Tensor::empty(x.shape());
    ops::round_to(host(), want, dt);
    Tensor device = gpu.copy_of(x);
    ops::round_to(gpu, device, dt);
    gpu.copy(device, got);
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got.data<float>()[i]), std::bit_cast<uint32_t>(want.data<float>()[i]))
          << dtype_name(dt) << " of bits 0x" << std::hex << std::bit_cast<uint32_t>(x.data<float>()[i]);
  }
}

TEST(Dispatch, CudaQkvSplitsAndMergesMatchTheCpu) {
  // The fused qkv product's split (with RoPE on q and k, and without) and the backward's merge (with the inverse
  // rotation, and without) on the device against the CPU: copies bit for bit, rotations to fp32 rounding (the
  // compilers may contract a * c - b * s differently). GQA heads, odd row counts, outputs poisoned first.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  Rng rng(44);
  auto poisoned = [&](const Shape& shape) { return gpu.copy_of(filled(shape, std::nanf(""))); };
  auto back = [&](const Tensor& device) {
    Tensor host = Tensor::empty(device.shape());
    gpu.copy(device, host);
    return host;
  };
  auto doubles = [](const Tensor& t) {
    const std::vector<float> v = values_of(t);
    return std::vector<double>(v.begin(), v.end());
  };
  for (const auto [n, hq, hkv, d] : {std::array<int64_t, 4>{17, 4, 2, 12}, {1, 2, 2, 54}, {54, 6, 1, 64}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " hq=" << hq << " hkv=" << hkv << " d=" << d);
    const Tensor table = ops::rope_table(host(), 128, d, 10000.0f);
    Tensor positions = Tensor::empty({n}, DType::kI32);
    for (int64_t i = 0; i < n; ++i) positions.data<int32_t>()[i] = static_cast<int32_t>(i * 37 % 128);
    const Tensor qkv = rng.normal({n, (hq + 2 * hkv) * d});
    const Tensor dq = rng.normal({n, hq, d}), dk = rng.normal({n, hkv, d}), dv = rng.normal({n, hkv, d});
    const Tensor g_qkv = gpu.copy_of(qkv), g_pos = gpu.copy_of(positions);
    const Tensor g_table = ops::rope_table(gpu, 128, d, 10000.0f);  // computed on the host, returned on the device
    const Tensor g_dq = gpu.copy_of(dq), g_dk = gpu.copy_of(dk), g_dv = gpu.copy_of(dv);
    for (const bool rope : {true, false}) {
      SCOPED_TRACE(rope ? "rope" : "plain");
      Tensor q = Tensor::empty({n, hq, d}), k = Tensor::empty({n, hkv, d}), v = Tensor::empty({n, hkv, d});
      Tensor merged = Tensor::empty(qkv.shape());
      Tensor g_q = poisoned(q.shape()), g_k = poisoned(k.shape()), g_v = poisoned(v.shape());
      Tensor g_merged = poisoned(qkv.shape());
      if (rope) {
        ops::rope_split_qkv(host(), qkv, positions, table, q, k, v);
        ops::rope_backward_merge_qkv(host(), dq, dk, dv, positions, table, merged);
        ops::rope_split_qkv(gpu, g_qkv, g_pos, g_table, g_q, g_k, g_v);
        ops::rope_backward_merge_qkv(gpu, g_dq, g_dk, g_dv, g_pos, g_table, g_merged);
      } else {
        ops::split_qkv(host(), qkv, q, k, v);
        ops::merge_qkv(host(), dq, dk, dv, merged);
        ops::split_qkv(gpu, g_qkv, g_q, g_k, g_v);
        ops::merge_qkv(gpu, g_dq, g_dk, g_dv, g_merged);
      }
      const float tol = rope ? 1e-6f : 0.0f;
      expect_near_all(back(g_q), doubles(q), tol, tol, "q");
      expect_near_all(back(g_k), doubles(k), tol, tol, "k");
      EXPECT_EQ(std::memcmp(back(g_v).raw(), v.raw(), v.nbytes()), 0) << "v";
      expect_near_all(back(g_merged), doubles(merged), tol, tol, "merged");
    }
  }
}

TEST(Dispatch, CudaRmsNormMatchesTheCpuInEachDtype) {
  // rmsnorm_forward on the device against the CPU: fp32 to fp32 rounding of another sum order; in bf16 and fp16
  // Hugging Face's expression round(round(w) * round(x * rstd)), within one ulp of the dtype (rstd may differ in
  // its last bit). And the backward (dx accumulates, dweight accumulates) in fp32. Outputs poisoned first.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  Rng rng(47);
  auto back = [&](const Tensor& device) {
    Tensor h = Tensor::empty(device.shape());
    gpu.copy(device, h);
    return h;
  };
  for (const auto [n, c] : {std::array<int64_t, 2>{1, 12}, {17, 54}, {54, 97}, {12, 1000}}) {
    const Tensor x = rng.normal({n, c}), w = rng.normal({c}), dout = rng.normal({n, c});
    for (const DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " c=" << c << " " << dtype_name(dt));
      Tensor out = Tensor::empty({n, c}), rstd = Tensor::empty({n});
      ops::rmsnorm_forward(host(), x, w, 1e-5f, out, rstd, dt);
      Tensor g_out = gpu.copy_of(filled({n, c}, std::nanf(""))), g_rstd = gpu.copy_of(filled({n}, std::nanf("")));
      ops::rmsnorm_forward(gpu, gpu.copy_of(x), gpu.copy_of(w), 1e-5f, g_out, g_rstd, dt);
      const double ulp = dt == DType::kBF16 ? std::ldexp(1.0, -7) : dt == DType::kF16 ? std::ldexp(1.0, -10) : 2e-6;
      const Tensor got = back(g_out), got_rstd = back(g_rstd);
      for (int64_t i = 0; i < n * c; ++i) {
        const float want = out.data<float>()[i];
        ASSERT_NEAR(got.data<float>()[i], want, ulp * std::fabs(want) + 1e-6) << i;
      }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(got_rstd.data<float>()[i], rstd.data<float>()[i], 2e-6 * rstd.data<float>()[i]);
    }
    Tensor dx = filled({n, c}, 0.5f), dw = filled({c}, 0.25f), rstd = Tensor::empty({n}), out = Tensor::empty({n, c});
    ops::rmsnorm_forward(host(), x, w, 1e-5f, out, rstd);
    Tensor g_dx = gpu.copy_of(dx), g_dw = gpu.copy_of(dw);
    ops::rmsnorm_backward(host(), dout, x, w, rstd, dx, dw);
    ops::rmsnorm_backward(gpu, gpu.copy_of(dout), gpu.copy_of(x), gpu.copy_of(w), gpu.copy_of(rstd), g_dx, g_dw);
    const Tensor got_dx = back(g_dx), got_dw = back(g_dw);
    for (int64_t i = 0; i < n * c; ++i)
      ASSERT_NEAR(got_dx.data<float>()[i], dx.data<float>()[i], 1e-5 * (1 + std::fabs(dx.data<float>()[i]))) << i;
    for (int64_t j = 0; j < c; ++j)
      ASSERT_NEAR(got_dw.data<float>()[j], dw.data<float>()[j], 1e-5 * (1 + std::fabs(dw.data<float>()[j]))) << j;
  }
}

TEST(Dispatch, MatmulMathOtherThanF32RunsOnCudaOnly) {
  Rng rng(45);
  const Tensor a = rng.normal({3, 4}), b = rng.normal({4, 5});
  Tensor c = Tensor::empty({3, 5});
  EXPECT_ERROR_MENTIONS(
      error_of([&] { ops::matmul(host(), a, false, b, false, c, 1.0f, 0.0f, ops::MatmulMath::kBF16); }),
      "matmul: bf16 math runs on CUDA only");
}

TEST(Dispatch, CudaMatmulMathRoundsTheOperands) {
  // cuBLAS's tensor-op math on fp32 matrices: the products of the operands rounded to TF32, BF16 or F16 (to
  // nearest), summed in fp32. Against a double sum over the rounded operands, to fp32 accumulation; and far
  // enough from the fp32 product that the rounding did happen. All four transpose combinations, odd sizes.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  Rng rng(46);
  auto tf32 = [](float x) {  // to nearest even at 10 mantissa bits
    const uint32_t u = std::bit_cast<uint32_t>(x);
    return std::bit_cast<float>((u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);
  };
  auto round_operand = [&](ops::MatmulMath math, float x) {
    switch (math) {
      case ops::MatmulMath::kTF32: return tf32(x);
      case ops::MatmulMath::kBF16: return cpu::bf16_round_reference(x);
      case ops::MatmulMath::kF16: return cpu::f16_round_reference(x);
      case ops::MatmulMath::kF32: return x;
    }
    return x;
  };
  const int64_t m = 17, n = 54, k = 97;
  for (const ops::MatmulMath math : {ops::MatmulMath::kF32, ops::MatmulMath::kTF32, ops::MatmulMath::kBF16,
                                     ops::MatmulMath::kF16}) {
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << ops::matmul_math_name(math) << " ta=" << ta << " tb=" << tb);
        const Tensor a = rng.normal(ta ? Shape{k, m} : Shape{m, k}), b = rng.normal(tb ? Shape{n, k} : Shape{k, n});
        const Tensor da = gpu.copy_of(a), db = gpu.copy_of(b);
        Tensor dc = gpu.copy_of(filled({m, n}, std::nanf(""))), c = Tensor::empty({m, n});
        ops::matmul(gpu, da, ta, db, tb, dc, 1.0f, 0.0f, math);
        gpu.copy(dc, c);
        double far_from_fp32 = 0.0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double rounded = 0.0, exact = 0.0, magnitude = 0.0;
            for (int64_t l = 0; l < k; ++l) {
              const float x = ta ? a.data<float>()[l * m + i] : a.data<float>()[i * k + l];
              const float y = tb ? b.data<float>()[j * k + l] : b.data<float>()[l * n + j];
              rounded += double(round_operand(math, x)) * round_operand(math, y);
              exact += double(x) * y;
              magnitude += std::fabs(double(x) * y);
            }
            const double got = c.data<float>()[i * n + j];
            ASSERT_NEAR(got, rounded, (k + 1) * std::ldexp(1.0, -23) * magnitude) << i << "," << j;
            far_from_fp32 = std::max(far_from_fp32, std::fabs(got - exact) / magnitude);
          }
        if (math != ops::MatmulMath::kF32)  // a rounding of 2^-9..2^-12 per operand shows; fp32's would not
          EXPECT_GT(far_from_fp32, 1e-5) << "the operands were not rounded";
      }
  }
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
