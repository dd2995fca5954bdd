// The packed matmul (ops::pack_weight, ops::matmul_packed): values against a double reference and against the
// one fused multiply-add chain per output it promises, batch invariance bit for bit, guard bytes around the
// output, repacking, the backward's input gradient, and the errors it throws; and the weight gradient
// (ops::linear_weight_grad) against its fma chains.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/dtype_round.h"
#include "kernels/ops.h"
#include "tests/host_context.h"
#include "tests/kernels_test_support.h"

namespace rlcpp {
namespace {

using testing::host;

using testing::error_of;
using testing::Guarded;
using testing::Rng;
using testing::same_bits;

struct Dims {
  int64_t m, n, k;
};

// Odd shapes: N and K off the 16-wide panel, M off the row tile, M in the thin tile's 7..16 rows, and shapes
// large enough to run on two threads.
const Dims kShapes[] = {{1, 1, 1},     {3, 17, 5},     {17, 33, 130}, {64, 100, 37}, {64, 20, 352},
                        {17, 256, 128}, {64, 704, 129}, {9, 33, 129},  {16, 97, 130}, {12, 704, 131}};

// The promised arithmetic, one output at a time: acc = 0, acc = fma(x[m][k], w[n][k], acc) for k in order.
std::vector<float> fma_chain_reference(const Tensor& x, const Tensor& w) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t l = 0; l < k; ++l) acc = std::fma(x.data<float>()[i * k + l], w.data<float>()[j * k + l], acc);
      y[static_cast<size_t>(i * n + j)] = acc;
    }
  return y;
}

TEST(PackedMatmul, MatchesDoubleReferenceWithinFp32Rounding) {
  Rng rng(7);
  for (const Dims& d : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << d.m << " N=" << d.n << " K=" << d.k);
    const Tensor x = rng.normal({d.m, d.k}), w = rng.normal({d.n, d.k}), y0 = rng.normal({d.m, d.n});
    ops::PackedWeight pw;
    ops::pack_weight(host(), w, pw);
    for (bool accumulate : {false, true}) {
      Guarded y({d.m, d.n});
      if (accumulate) y.copy_from(y0);
      ops::matmul_packed(host(), x, pw, y.t(), accumulate);
      EXPECT_TRUE(y.guards_intact()) << "accumulate " << accumulate;
      int misses = 0;
      for (int64_t i = 0; i < d.m; ++i)
        for (int64_t j = 0; j < d.n; ++j) {
          double s = accumulate ? y0.data<float>()[i * d.n + j] : 0.0, abs_sum = std::fabs(s);
          for (int64_t l = 0; l < d.k; ++l) {
            const double p = double(x.data<float>()[i * d.k + l]) * w.data<float>()[j * d.k + l];
            s += p;
            abs_sum += std::fabs(p);
          }
          // A chain of K + 1 roundings is off by at most (K + 1) * 2^-24 of the sum of the magnitudes; leaving
          // out or repeating one product is off by about one product, far more.
          const double tol = static_cast<double>(d.k + 1) * std::ldexp(1.0, -24) * abs_sum;
          const double err = std::fabs(double(y.data()[i * d.n + j]) - s);
          if (!(err <= tol) && ++misses <= 5)
            ADD_FAILURE() << "y[" << i << "][" << j << "] = " << y.data()[i * d.n + j] << ", expected " << s;
        }
      EXPECT_EQ(misses, 0) << "accumulate " << accumulate;
    }
  }
}

TEST(PackedMatmul, EachOutputIsOneFmaChainInOrder) {
  // The exact arithmetic the batch invariance rests on, bit for bit (the AVX-512 and the portable path alike).
  Rng rng(8);
  for (const Dims& d : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << d.m << " N=" << d.n << " K=" << d.k);
    const Tensor x = rng.normal({d.m, d.k}), w = rng.normal({d.n, d.k}), y0 = rng.normal({d.m, d.n});
    ops::PackedWeight pw;
    ops::pack_weight(host(), w, pw);
    const std::vector<float> chain = fma_chain_reference(x, w);
    Tensor y = Tensor::empty({d.m, d.n});
    ops::matmul_packed(host(), x, pw, y);
    EXPECT_TRUE(same_bits(y.data<float>(), chain.data(), y.numel()));
    Tensor acc = y0.clone();
    ops::matmul_packed(host(), x, pw, acc, /*accumulate=*/true);
    std::vector<float> want(chain.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = y0.data<float>()[i] + chain[i];
    EXPECT_TRUE(same_bits(acc.data<float>(), want.data(), acc.numel()));
  }
}

TEST(PackedMatmul, RowResultsAreBitIdenticalInBatchesOf1And7And16And64) {
  Rng rng(9);
  const int64_t m = 64;
  for (const Dims& d : {Dims{m, 704, 128}, Dims{m, 100, 37}, Dims{m, 33, 352}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << d.n << " K=" << d.k);
    const Tensor x = rng.normal({m, d.k}), w = rng.normal({d.n, d.k});
    ops::PackedWeight pw;
    ops::pack_weight(host(), w, pw);
    Tensor full = Tensor::empty({m, d.n});
    ops::matmul_packed(host(), x, pw, full);
    for (int64_t batch : {1, 7, 16, 64}) {  // the wide tile, the thin tile (7..16 rows), both
      for (int64_t r0 = 0; r0 < m; r0 += batch) {
        const int64_t rows = std::min(batch, m - r0);
        // The rows start at another offset in a fresh buffer, so alignment differs too.
        Tensor part = Tensor::empty({rows, d.k});
        std::memcpy(part.data<float>(), x.data<float>() + r0 * d.k, static_cast<size_t>(rows * d.k) * sizeof(float));
        Tensor y = Tensor::empty({rows, d.n});
        ops::matmul_packed(host(), part, pw, y);
        EXPECT_TRUE(same_bits(y.data<float>(), full.data<float>() + r0 * d.n, rows * d.n))
            << "rows " << r0 << ".." << r0 + rows << " in a batch of " << batch;
      }
    }
    // And on one thread as on two.
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    Tensor one = Tensor::empty({m, d.n});
    ops::matmul_packed(host(), x, pw, one);
    omp_set_num_threads(std::max(2, threads));
    Tensor two = Tensor::empty({m, d.n});
    ops::matmul_packed(host(), x, pw, two);
    omp_set_num_threads(threads);
    EXPECT_TRUE(same_bits(one.data<float>(), full.data<float>(), one.numel()));
    EXPECT_TRUE(same_bits(two.data<float>(), full.data<float>(), two.numel()));
  }
}

// y = residual + x @ w^T in one pass: the bits of copying the residual into y and accumulating, into another
// buffer or in place.
TEST(PackedMatmul, ResidualProductEqualsCopyThenAccumulate) {
  Rng rng(15);
  for (const Dims& d : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << d.m << " N=" << d.n << " K=" << d.k);
    const Tensor x = rng.normal({d.m, d.k}), w = rng.normal({d.n, d.k}), res = rng.normal({d.m, d.n});
    ops::PackedWeight pw;
    ops::pack_weight(host(), w, pw);
    Tensor want = res.clone();
    ops::matmul_packed(host(), x, pw, want, /*accumulate=*/true);
    Guarded y({d.m, d.n});
    ops::matmul_packed_residual(host(), x, pw, res, y.t());
    EXPECT_TRUE(y.guards_intact());
    EXPECT_TRUE(same_bits(y.data(), want.data<float>(), want.numel()));
    Tensor in_place = res.clone();
    ops::matmul_packed_residual(host(), x, pw, in_place, in_place);
    EXPECT_TRUE(same_bits(in_place.data<float>(), want.data<float>(), want.numel()));
  }
}

// The epilogue is separate IEEE operations — the chain times the channel scale rounded, then added to the residual
// and rounded — never one fused multiply-add (GCC contracts a * b + c under its default -ffp-contract=fast; the
// CUDA kernel uses __fmul_rn and __fadd_rn): in every format and compute dtype, the residual form equals the plain
// product plus the residual, added here as a separate float operation.
TEST(PackedMatmul, TheEpilogueMultipliesAndAddsSeparately) {
  Rng rng(16);
  for (const DType format :
       {DType::kF32, DType::kBF16, DType::kF16, DType::kInt8, DType::kFp8E4M3}) {
    for (const Dims& d : kShapes) {
      SCOPED_TRACE(::testing::Message() << precision_name(format) << " M=" << d.m << " N=" << d.n << " K=" << d.k);
      const Tensor x = rng.normal({d.m, d.k}), w = rng.normal({d.n, d.k}, 0.3f), res = rng.normal({d.m, d.n});
      ops::PackedWeight pw;
      ops::pack_weight(host(), w, pw, format);
      Tensor product = Tensor::empty({d.m, d.n}), y = Tensor::empty({d.m, d.n});
      ops::matmul_packed(host(), x, pw, product);
      ops::matmul_packed_residual(host(), x, pw, res, y);
      std::vector<float> want(static_cast<size_t>(product.numel()));
      for (size_t i = 0; i < want.size(); ++i) {
        volatile float scaled = product.data<float>()[i];  // stored: no fusing with the add below
        want[i] = res.data<float>()[i] + scaled;
      }
      EXPECT_TRUE(same_bits(y.data<float>(), want.data(), y.numel()));
    }
  }
}

TEST(PackedMatmul, RepackingReusesTheBufferAndTakesTheNewWeights) {
  Rng rng(10);
  Tensor w = rng.normal({40, 24});
  const Tensor x = rng.normal({5, 24});
  ops::PackedWeight pw;
  ops::pack_weight(host(), w, pw);
  const float* buffer = pw.panels.data<float>();
  EXPECT_EQ(pw.panels.shape(), (Shape{3, 24, 16}));
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] *= -2.0f;  // the weights change in place
  ops::pack_weight(host(), w, pw);
  EXPECT_EQ(pw.panels.data<float>(), buffer);
  Tensor y = Tensor::empty({5, 40});
  ops::matmul_packed(host(), x, pw, y);
  const std::vector<float> want = fma_chain_reference(x, w);
  EXPECT_TRUE(same_bits(y.data<float>(), want.data(), y.numel()));
  // The padding columns of the last panel (40..47) are zero.
  for (int64_t kk = 0; kk < 24; ++kk)
    for (int64_t j = 8; j < 16; ++j) EXPECT_EQ(pw.panels.data<float>()[(2 * 24 + kk) * 16 + j], 0.0f);
}

// The backward's input gradient dx = dy @ w through pack_weight_transposed (the panels of w^T without forming
// it) and matmul_packed, against a double reference.
TEST(PackedMatmul, InputGradientThroughTheTransposedPackingMatchesDoubleReference) {
  Rng rng(12);
  const Dims shapes[] = {{1, 1, 1}, {7, 17, 5}, {300, 33, 130}, {64, 100, 37}, {130, 13, 352}};
  for (const Dims& d : shapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << d.m << " N=" << d.n << " K=" << d.k);
    // A Linear layer y (M,N) = x (M,K) @ w^T, w (N,K); dy (M,N).
    const Tensor w = rng.normal({d.n, d.k}), dy = rng.normal({d.m, d.n});
    ops::PackedWeight wt;
    ops::pack_weight_transposed(host(), w, wt);
    EXPECT_EQ(wt.n, d.k);
    EXPECT_EQ(wt.k, d.n);
    Guarded dx({d.m, d.k});
    ops::matmul_packed(host(), dy, wt, dx.t());
    EXPECT_TRUE(dx.guards_intact());
    int misses = 0;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t c = 0; c < d.k; ++c) {  // dx[i][c] = sum_j dy[i][j] w[j][c]
        double s = 0, a = 0;
        for (int64_t j = 0; j < d.n; ++j) {
          const double p = double(dy.data<float>()[i * d.n + j]) * w.data<float>()[j * d.k + c];
          s += p;
          a += std::fabs(p);
        }
        const double tol = static_cast<double>(d.n + 1) * std::ldexp(1.0, -24) * a;
        if (!(std::fabs(double(dx.data()[i * d.k + c]) - s) <= tol) && ++misses <= 5)
          ADD_FAILURE() << "dx[" << i << "][" << c << "] = " << dx.data()[i * d.k + c] << ", expected " << s;
      }
    EXPECT_EQ(misses, 0);
  }
}

// A bf16 model's backward packs its weights transposed in bf16: the panels of pack_weight(w^T, BF16) bit for bit
// (pairs of w's rows in one word, an odd N's last row with a zero lower half), so dx = dy @ w multiplies dy rounded
// to bf16 operands by bf16 weights in fma chains, as the forward's bf16 product does.
TEST(PackedMatmul, Bf16TransposedPanelsAreThePanelsOfTheTranspose) {
  Rng rng(16);
  const Dims shapes[] = {{1, 1, 1}, {7, 17, 5}, {3, 33, 130}, {5, 100, 37}, {2, 64, 48}};
  for (const Dims& d : shapes) {  // w (N,K) = (d.n, d.k); dy (M,N)
    SCOPED_TRACE(::testing::Message() << "N=" << d.n << " K=" << d.k);
    const Tensor w = rng.normal({d.n, d.k}), dy = rng.normal({d.m, d.n});
    Tensor w_t = Tensor::empty({d.k, d.n});
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t c = 0; c < d.k; ++c) w_t.data<float>()[c * d.n + i] = w.data<float>()[i * d.k + c];
    ops::PackedWeight transposed, of_transpose;
    ops::pack_weight_transposed(host(), w, transposed, DType::kBF16);
    ops::pack_weight(host(), w_t, of_transpose, DType::kBF16);
    ASSERT_EQ(transposed.panels.shape(), of_transpose.panels.shape());
    EXPECT_EQ(transposed.format, DType::kBF16);
    EXPECT_EQ(std::memcmp(transposed.panels.raw(), of_transpose.panels.raw(), transposed.panels.nbytes()), 0);
    Tensor dx = Tensor::empty({d.m, d.k}), want = Tensor::empty({d.m, d.k});
    ops::matmul_packed(host(), dy, transposed, dx);
    ops::matmul_packed(host(), dy, of_transpose, want);
    EXPECT_TRUE(same_bits(dx.data<float>(), want.data<float>(), dx.numel()));
  }
}

// A weight held in bf16 (a frozen LoRA base) packs into the panels of its values widened to fp32, in every panel
// format and transposed, on the CPU's kernel and the reference's: shapes spanning several panels, a partial last
// one, an odd depth, and a subnormal bf16 value (a bf16 panel flushes it as it flushes the widened fp32). The
// CUDA backend refuses a bf16 source, naming it.
TEST(PackedMatmul, ABf16HeldWeightPacksAsItsWidenedValues) {
  Rng rng(17);
  const DType formats[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kInt8, DType::kFp8E4M3};
  for (const char* backend : {"cpu", "reference"}) {
    const ExecContext ctx = ExecContext::cpu().on_backend(backend);
    for (const Shape& shape : {Shape{54, 97}, Shape{53, 96}, Shape{16, 3}, Shape{1, 1}}) {
      Tensor held = Tensor::empty(shape, DType::kBF16);
      ops::convert(ctx, rng.normal(shape, 0.3f), held);
      held.data<uint16_t>()[0] = 0x0003;  // a bf16 subnormal
      Tensor widened = Tensor::empty(shape);
      ops::convert(ctx, held, widened);
      for (const DType format : formats) {
        SCOPED_TRACE(::testing::Message() << backend << " " << shape_str(shape) << " " << dtype_name(format));
        ops::PackedWeight from_held, from_widened;
        ops::pack_weight(ctx, held, from_held, format);
        ops::pack_weight(ctx, widened, from_widened, format);
        ASSERT_EQ(from_held.panels.shape(), from_widened.panels.shape());
        EXPECT_EQ(std::memcmp(from_held.panels.raw(), from_widened.panels.raw(), from_held.panels.nbytes()), 0);
        if (from_widened.scales.defined())
          EXPECT_TRUE(same_bits(from_held.scales.data<float>(), from_widened.scales.data<float>(),
                                from_held.scales.numel()));
        if (format != DType::kF32 && format != DType::kBF16) continue;
        ops::pack_weight_transposed(ctx, held, from_held, format);
        ops::pack_weight_transposed(ctx, widened, from_widened, format);
        ASSERT_EQ(from_held.panels.shape(), from_widened.panels.shape());
        EXPECT_EQ(std::memcmp(from_held.panels.raw(), from_widened.panels.raw(), from_held.panels.nbytes()), 0)
            << "transposed";
      }
    }
  }
  ops::PackedWeight packed;
  Tensor fp16 = Tensor::empty({4, 4}, DType::kF16);
  EXPECT_NE(error_of([&] { ops::pack_weight(host(), fp16, packed); }).find("w of dtype F16"), std::string::npos);
}

// The weight gradient dw (N,K) += dy (M,N)^T @ x (M,K), operands read in place: one fma chain per output over
// the rows in order from dw's value (bit for bit), so splitting the rows into consecutive calls, as the chunked
// backward does, or running on one or two threads gives the same bits; guard bytes around dw stay intact.
TEST(LinearWeightGrad, EachOutputIsOneFmaChainOverTheRowsFromDwsValue) {
  Rng rng(13);
  // Odd shapes: K (dw's columns) off the 16-wide vector and the 64-wide tile, N off the 6-row tile, M off the
  // 64-row block; and the W1 shapes large enough to run on two threads.
  const Dims shapes[] = {{1, 1, 1},   {5, 7, 3},     {65, 13, 17},  {130, 6, 64},
                         {37, 20, 81}, {256, 704, 128}, {300, 128, 352}};
  for (const Dims& d : shapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << d.m << " N=" << d.n << " K=" << d.k);
    const Tensor dy = rng.normal({d.m, d.n}), x = rng.normal({d.m, d.k}), dw0 = rng.normal({d.n, d.k});
    std::vector<float> want(static_cast<size_t>(d.n * d.k));
    for (int64_t o = 0; o < d.n; ++o)
      for (int64_t i = 0; i < d.k; ++i) {
        float acc = dw0.data<float>()[o * d.k + i];
        for (int64_t t = 0; t < d.m; ++t) acc = std::fma(dy.data<float>()[t * d.n + o], x.data<float>()[t * d.k + i], acc);
        want[static_cast<size_t>(o * d.k + i)] = acc;
      }
    Guarded dw({d.n, d.k});
    dw.copy_from(dw0);
    ops::linear_weight_grad(host(), dy, x, dw.t());
    EXPECT_TRUE(dw.guards_intact());
    EXPECT_TRUE(same_bits(dw.data(), want.data(), d.n * d.k));
    // The rows in two calls (a cut off the 64-row block), on one thread.
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const int64_t cut = d.m / 3;
    Tensor split = dw0.clone();
    ops::linear_weight_grad(host(), dy.slice_rows(0, cut), x.slice_rows(0, cut), split);
    ops::linear_weight_grad(host(), dy.slice_rows(cut, d.m), x.slice_rows(cut, d.m), split);
    omp_set_num_threads(threads);
    EXPECT_TRUE(same_bits(split.data<float>(), want.data(), d.n * d.k));
  }
}

// BF16 math, a bf16 model's backward: the same chains over dy and x rounded to bf16 operands (subnormals to zero),
// two rows a vdpbf16ps on AVX512-BF16 — bit for bit, across pair blocks (M > 128), an odd M's last row, calls cut
// at an odd row and one or two threads.
TEST(LinearWeightGrad, Bf16MathIsTheFmaChainOverBf16Operands) {
  Rng rng(15);
  const Dims shapes[] = {{1, 1, 1}, {2, 7, 3}, {5, 7, 3}, {130, 6, 64}, {301, 13, 81}, {257, 704, 128}};
  auto operand = [](float v) { return cpu::bf16_operand_reference(v); };
  for (const Dims& d : shapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << d.m << " N=" << d.n << " K=" << d.k);
    Tensor dy = rng.normal({d.m, d.n}), x = rng.normal({d.m, d.k});
    const Tensor dw0 = rng.normal({d.n, d.k});
    x.data<float>()[0] = 3e-39f;  // an fp32 subnormal: a zero operand
    std::vector<float> want(static_cast<size_t>(d.n * d.k));
    for (int64_t o = 0; o < d.n; ++o)
      for (int64_t i = 0; i < d.k; ++i) {
        float acc = dw0.data<float>()[o * d.k + i];
        for (int64_t t = 0; t < d.m; ++t)
          acc = std::fma(operand(dy.data<float>()[t * d.n + o]), operand(x.data<float>()[t * d.k + i]), acc);
        want[static_cast<size_t>(o * d.k + i)] = acc;
      }
    Guarded dw({d.n, d.k});
    dw.copy_from(dw0);
    ops::linear_weight_grad(host(), dy, x, dw.t(), DType::kBF16);
    EXPECT_TRUE(dw.guards_intact());
    EXPECT_TRUE(same_bits(dw.data(), want.data(), d.n * d.k));
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const int64_t cut = d.m / 3 | 1;  // odd: the first call ends on a row of its own
    Tensor split = dw0.clone();
    if (cut < d.m) {
      ops::linear_weight_grad(host(), dy.slice_rows(0, cut), x.slice_rows(0, cut), split, DType::kBF16);
      ops::linear_weight_grad(host(), dy.slice_rows(cut, d.m), x.slice_rows(cut, d.m), split, DType::kBF16);
    } else {
      ops::linear_weight_grad(host(), dy, x, split, DType::kBF16);
    }
    omp_set_num_threads(threads);
    EXPECT_TRUE(same_bits(split.data<float>(), want.data(), d.n * d.k));
  }
}

TEST(LinearWeightGrad, ShapeErrorsNameTheOperands) {
  Rng rng(14);
  Tensor dy = rng.normal({4, 6}), x = rng.normal({5, 3}), dw = Tensor::zeros({6, 3});
  const std::string rows = error_of([&] { ops::linear_weight_grad(host(), dy, x, dw); });
  EXPECT_NE(rows.find("linear_weight_grad"), std::string::npos) << rows;
  EXPECT_NE(rows.find("row counts"), std::string::npos) << rows;
  Tensor x4 = rng.normal({4, 3}), dw_bad = Tensor::zeros({6, 4});
  const std::string shape = error_of([&] { ops::linear_weight_grad(host(), dy, x4, dw_bad); });
  EXPECT_NE(shape.find("dw"), std::string::npos) << shape;
}

TEST(PackedMatmul, ShapeErrorsNameTheSizes) {
  Rng rng(11);
  ops::PackedWeight pw;
  ops::pack_weight(host(), rng.normal({20, 8}), pw);
  Tensor x = rng.normal({3, 9}), y = Tensor::empty({3, 20});
  const std::string k_error = error_of([&] { ops::matmul_packed(host(), x, pw, y); });
  EXPECT_NE(k_error.find("K = 9"), std::string::npos) << k_error;
  EXPECT_NE(k_error.find("(20,8)"), std::string::npos) << k_error;
  Tensor x8 = rng.normal({3, 8}), y_bad = Tensor::empty({3, 21});
  const std::string y_error = error_of([&] { ops::matmul_packed(host(), x8, pw, y_bad); });
  EXPECT_NE(y_error.find("matmul_packed"), std::string::npos) << y_error;
  EXPECT_NE(y_error.find("21"), std::string::npos) << y_error;
  const std::string rank_error = error_of([&] { ops::pack_weight(host(), rng.normal({4}), pw); });
  EXPECT_NE(rank_error.find("pack_weight"), std::string::npos) << rank_error;
}

}  // namespace
}  // namespace rlcpp
