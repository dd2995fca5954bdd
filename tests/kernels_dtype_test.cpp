// The compute dtypes and weight formats: the fast roundings against their bit-level references over every class
// of float, the fp8 decoding trick over all 256 codes, and the ops that round (round_to, the packed product's
// epilogue and its 16-bit and quantised panels, RMSNorm, 16-bit KV caches) against the reference definitions.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/dtype_round.h"
#include "kernels/ops.h"
#include "kernels_test_support.h"
#include "tests/host_context.h"

namespace rlcpp {
namespace {

using testing::host;

using namespace rlcpp::cpu;
using testing::Rng;

bool same_bits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// Bit patterns covering every exponent, both signs, subnormals, the halfway cases of both formats and NaN/inf:
// a stride through all 2^32 patterns plus the neighbourhood of each format's rounding boundaries.
std::vector<uint32_t> float_patterns() {
  std::vector<uint32_t> p;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) p.push_back(static_cast<uint32_t>(u));
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t low : {0x0u, 0x7FFFu, 0x8000u, 0x8001u, 0x18000u, 0xFFFu, 0x1000u, 0x1001u, 0x3000u, 0x7FFFFFu})
      for (uint32_t sign : {0u, 0x80000000u}) p.push_back(sign | (e << 23) | low);
  return p;
}

TEST(DtypeRound, Bf16FastFormEqualsTheReferenceOnEveryFloatClass) {
  int64_t checked = 0;
  for (uint32_t u : float_patterns()) {
    const float x = std::bit_cast<float>(u);
    ASSERT_TRUE(same_bits(bf16_round(x), bf16_round_reference(x))) << "bits 0x" << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
}

TEST(DtypeRound, F16FastFormEqualsTheReferenceOnEveryFloatClass) {
  for (uint32_t u : float_patterns()) {
    const float x = std::bit_cast<float>(u);
    ASSERT_TRUE(same_bits(f16_round(x), f16_round_reference(x))) << "bits 0x" << std::hex << u << " x " << x;
    if (!std::isnan(x)) ASSERT_EQ(f16_bits(x), f16_bits_reference(x)) << "bits 0x" << std::hex << u;
  }
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_TRUE(same_bits(f16_value(static_cast<uint16_t>(h)), f16_value_reference(static_cast<uint16_t>(h))))
        << "half 0x" << std::hex << h;
}

TEST(DtypeRound, KnownValuesRoundToNearestEven) {
  // bf16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to the even 1.
  EXPECT_EQ(bf16_round_reference(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(bf16_round_reference(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(bf16_round_reference(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(bf16_round_reference(3.4e38f), INFINITY);  // past the largest bf16 (3.39e38)
  // fp16: 11 significant bits, max 65504, smallest subnormal 2^-24.
  EXPECT_EQ(f16_round_reference(1.0f + 0x1p-11f), 1.0f);
  EXPECT_EQ(f16_round_reference(65519.0f), 65504.0f);
  EXPECT_EQ(f16_round_reference(65520.0f), INFINITY);
  EXPECT_EQ(f16_round_reference(0x1p-25f), 0.0f);                 // halfway to 2^-24: ties to even 0
  EXPECT_EQ(f16_round_reference(0x1p-25f + 0x1p-30f), 0x1p-24f);
  EXPECT_EQ(f16_round_reference(0.1f), 0.0999755859375f);
}

TEST(DtypeRound, E4m3CodesDecodeTheSameThroughTheFp16Trick) {
  for (uint32_t b = 0; b < 256; ++b) {
    const uint8_t code = static_cast<uint8_t>(b);
    const float value = e4m3_value_reference(code);
    if ((b & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(value));
      continue;
    }
    EXPECT_EQ(f16_value_reference(e4m3_to_f16_bits_scaled(code)) * kE4m3F16Scale, value) << "code " << b;
    EXPECT_EQ(e4m3_bits_reference(value), (b == 0x80 ? 0x80u : b)) << "code " << b << " value " << value;
  }
  EXPECT_EQ(e4m3_value_reference(0x7E), 448.0f);
  EXPECT_EQ(e4m3_value_reference(0x01), 0x1p-9f);
  EXPECT_EQ(e4m3_value_reference(0x08), 0x1p-6f);
  EXPECT_EQ(e4m3_bits_reference(1000.0f), 0x7Eu);   // saturates
  EXPECT_EQ(e4m3_bits_reference(-1000.0f), 0xFEu);
  EXPECT_EQ(e4m3_bits_reference(1.0625f), 0x38u);   // halfway between 1 and 1.125: ties to even 1
  EXPECT_EQ(e4m3_bits_reference(1.1875f), 0x3Au);   // halfway between 1.125 and 1.25: to 1.25
}

TEST(RoundTo, TensorOpEqualsTheReferencePerElement) {
  Rng rng(3);
  Tensor x = rng.normal({7, 97}, 30.0f);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Tensor y = x.clone();
    ops::round_to(host(), y, dt);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float want = dt == DType::kBF16 ? bf16_round_reference(x.data<float>()[i])
                                            : f16_round_reference(x.data<float>()[i]);
      ASSERT_TRUE(same_bits(y.data<float>()[i], want)) << dtype_name(dt) << " element " << i;
    }
  }
  Tensor same = x.clone();
  ops::round_to(host(), same, DType::kF32);
  EXPECT_EQ(std::memcmp(same.raw(), x.raw(), x.nbytes()), 0);
  EXPECT_THROW(ops::round_to(host(), same, DType::kI32), Error);
}

// stored_as (a checkpoint's BF16 / F16 tensors): the bits of the reference rounding, read back as round_to's values.
TEST(StoredAs, BitsAreTheReferenceRoundingsBits) {
  Rng rng(4);
  const Tensor x = rng.normal({5, 61}, 30.0f);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    const Tensor y = ops::stored_as(host(), x, dt);
    ASSERT_EQ(y.dtype(), dt);
    ASSERT_EQ(y.shape(), x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const uint16_t bits = y.data<uint16_t>()[i];
      const float v = x.data<float>()[i];
      const uint16_t want = dt == DType::kBF16
                                ? static_cast<uint16_t>(std::bit_cast<uint32_t>(bf16_round_reference(v)) >> 16)
                                : f16_bits_reference(v);
      ASSERT_EQ(bits, want) << dtype_name(dt) << " element " << i;
    }
  }
  const Tensor copy = ops::stored_as(host(), x, DType::kF32);
  EXPECT_EQ(std::memcmp(copy.raw(), x.raw(), x.nbytes()), 0);
  EXPECT_THROW(ops::stored_as(host(), x, DType::kI32), Error);
  EXPECT_THROW(ops::stored_as(host(), ops::stored_as(host(), x, DType::kBF16), DType::kF16),
               Error);  // the input must be F32
}

// convert: a round trip through 16 bits gives round_to's values; other shapes or non-float dtypes are refused
// naming the operand.
TEST(Convert, RoundTripIsRoundToAndBadOperandsAreNamed) {
  Rng rng(5);
  const Tensor x = rng.normal({3, 17}, 30.0f);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Tensor stored = Tensor::empty({3, 17}, dt), back = Tensor::empty({3, 17}), want = x.clone();
    ops::convert(host(), x, stored);
    ops::convert(host(), stored, back);
    ops::round_to(host(), want, dt);
    EXPECT_EQ(std::memcmp(back.raw(), want.raw(), x.nbytes()), 0) << dtype_name(dt);
  }
  Tensor other_shape = Tensor::empty({17, 3}, DType::kBF16), ints = Tensor::empty({3, 17}, DType::kI32);
  auto message = [&](Tensor& dst) {
    try {
      ops::convert(host(), x, dst);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(other_shape).find("convert: src (3, 17) and dst (17, 3) differ in shape"), std::string::npos)
      << message(other_shape);
  EXPECT_NE(message(ints).find("convert: dst is I32, expected F32, BF16 or F16"), std::string::npos)
      << message(ints);
}

// The reference of a packed product: y[m][n] = scale[n] * sum_k x[m][k] w_q[n][k] in double, w_q the values the
// format stores (rounded, or the quantised codes).
struct FormatCase {
  DType format;
  double product_tol;  // relative to the row's sum of |x w|: fp32 accumulation of a k = 97 chain
  double weight_tol;   // |w_q - w| relative to the channel's max |w|
};

class PackedFormat : public ::testing::TestWithParam<FormatCase> {};

TEST_P(PackedFormat, UnpackedValuesAreTheFormatsRoundingOfTheWeights) {
  const FormatCase c = GetParam();
  Rng rng(11);
  const Tensor w = rng.normal({37, 97}, 0.3f);
  ops::PackedWeight packed;
  ops::pack_weight(host(), w, packed, c.format);
  const Tensor q = ops::unpack_weight(host(), packed);
  for (int64_t n = 0; n < 37; ++n) {
    float mx = 0;
    for (int64_t k = 0; k < 97; ++k) mx = std::max(mx, std::fabs(w.data<float>()[n * 97 + k]));
    for (int64_t k = 0; k < 97; ++k) {
      const float a = w.data<float>()[n * 97 + k], b = q.data<float>()[n * 97 + k];
      if (c.format == DType::kBF16) ASSERT_TRUE(same_bits(b, bf16_round_reference(a)));
      if (c.format == DType::kF16) ASSERT_TRUE(same_bits(b, f16_round_reference(a)));
      if (c.format == DType::kF32) ASSERT_TRUE(same_bits(b, a));
      ASSERT_LE(std::fabs(b - a), c.weight_tol * mx) << precision_name(c.format) << " at " << n << "," << k;
    }
  }
  if (is_quantized(c.format)) {  // the channel's largest weight maps onto the largest code, exactly recovered
    for (int64_t n = 0; n < 37; ++n) {
      int64_t at = 0;
      for (int64_t k = 1; k < 97; ++k)
        if (std::fabs(w.data<float>()[n * 97 + k]) > std::fabs(w.data<float>()[n * 97 + at])) at = k;
      EXPECT_NEAR(q.data<float>()[n * 97 + at], w.data<float>()[n * 97 + at],
                  1e-6 * std::fabs(w.data<float>()[n * 97 + at]));
    }
  }
}

TEST_P(PackedFormat, ProductMatchesTheReferenceAndIsBatchInvariant) {
  const FormatCase c = GetParam();
  Rng rng(12);
  const Tensor w = rng.normal({37, 97}, 0.3f), x = rng.normal({17, 97});
  ops::PackedWeight packed;
  ops::pack_weight(host(), w, packed, c.format);
  const Tensor q = ops::unpack_weight(host(), packed);
  Tensor y = Tensor::empty({17, 37});
  ops::matmul_packed(host(), x, packed, y);
  for (int64_t m = 0; m < 17; ++m)
    for (int64_t n = 0; n < 37; ++n) {
      double want = 0, scale = 0;
      for (int64_t k = 0; k < 97; ++k) {
        // A bf16 product's x operands are bf16 too (as a GPU's bf16 GEMM takes them).
        const float xv = x.data<float>()[m * 97 + k];
        const double xk = c.format == DType::kBF16 ? bf16_operand_reference(xv) : xv;
        want += xk * q.data<float>()[n * 97 + k];
        scale += std::fabs(xk * q.data<float>()[n * 97 + k]);
      }
      const float got = y.data<float>()[m * 37 + n];
      ASSERT_FALSE(std::isnan(got));
      ASSERT_NEAR(got, want, c.product_tol * scale) << precision_name(c.format) << " at " << m << "," << n;
    }
  // One row alone gives the same bits as in the batch of 17, and so do the first 16 rows (the thin tile).
  for (int64_t m : {0, 5, 16}) {
    Tensor y1 = Tensor::empty({1, 37});
    ops::matmul_packed(host(), x.slice_rows(m, m + 1), packed, y1);
    EXPECT_EQ(std::memcmp(y1.raw(), y.data<float>() + m * 37, 37 * sizeof(float)), 0) << "row " << m;
  }
  Tensor y16 = Tensor::empty({16, 37});
  ops::matmul_packed(host(), x.slice_rows(0, 16), packed, y16);
  EXPECT_EQ(std::memcmp(y16.raw(), y.raw(), y16.nbytes()), 0) << precision_name(c.format) << ", 16 rows";
}

TEST_P(PackedFormat, EpilogueRoundsTheProductThenTheResidualSum) {
  const FormatCase c = GetParam();
  Rng rng(13);
  const Tensor w = rng.normal({37, 97}, 0.3f), x = rng.normal({9, 97}), res = rng.normal({9, 37});
  ops::PackedWeight packed;
  ops::pack_weight(host(), w, packed, c.format);
  Tensor plain = Tensor::empty({9, 37});
  ops::matmul_packed(host(), x, packed, plain);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    auto round = [&](float v) { return dt == DType::kBF16 ? bf16_round_reference(v) : f16_round_reference(v); };
    Tensor y = Tensor::empty({9, 37}), yr = Tensor::empty({9, 37});
    ops::matmul_packed(host(), x, packed, y, false, dt);
    ops::matmul_packed_residual(host(), x, packed, res, yr, dt);
    for (int64_t i = 0; i < y.numel(); ++i) {
      const float p = round(plain.data<float>()[i]);
      ASSERT_TRUE(same_bits(y.data<float>()[i], p)) << dtype_name(dt) << " element " << i;
      ASSERT_TRUE(same_bits(yr.data<float>()[i], round(res.data<float>()[i] + p))) << dtype_name(dt) << " " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PackedFormat,
                         ::testing::Values(FormatCase{DType::kF32, 1e-5, 0.0},
                                           FormatCase{DType::kBF16, 1e-5, 1.0 / 128},
                                           FormatCase{DType::kF16, 1e-5, 1.0 / 1024},
                                           FormatCase{DType::kInt8, 1e-5, 0.5 / 127 + 1e-6},
                                           FormatCase{DType::kFp8E4M3, 1e-5, 1.0 / 16}),
                         [](const auto& info) { return std::string(precision_name(info.param.format)); });

TEST(PackedFormat16, BitsEqualTheFp32ProductOverTheRoundedOperands) {
  // A 16-bit panel is the same fma chain over the values it stores: exactly the fp32 product with the weights
  // rounded first (and for bf16 the activations too, bf16_operand). Odd and even K, a K longer than the 6-row
  // tile's, rows past a tile, the thin tile's 7..16 rows and an M that splits between threads; on AVX512-BF16
  // the bf16 product runs on vdpbf16ps, whose pairs of products must give the fma chain's bits.
  for (const auto [m, n, k] : {std::array<int64_t, 3>{13, 40, 33}, {13, 40, 34}, {1, 70, 1}, {97, 130, 301}, {7, 17, 2},
                               {16, 300, 301}, {5, 33, 9}}) {
    Rng rng(14 + k);
    const Tensor w = rng.normal({n, k}, 0.5f), x = rng.normal({m, k});
    for (DType f : {DType::kBF16, DType::kF16}) {
      ops::PackedWeight packed, reference;
      ops::pack_weight(host(), w, packed, f);
      ops::pack_weight(host(), ops::unpack_weight(host(), packed), reference, DType::kF32);
      Tensor xr = x.clone();
      if (f == DType::kBF16)
        for (int64_t i = 0; i < xr.numel(); ++i) xr.data<float>()[i] = bf16_operand_reference(xr.data<float>()[i]);
      Tensor a = Tensor::empty({m, n}), b = Tensor::empty({m, n}), ar = Tensor::empty({m, n});
      ops::matmul_packed(host(), x, packed, a);
      ops::matmul_packed(host(), xr, reference, b);
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << precision_name(f) << " k " << k;
      // The rounded epilogue and the residual form through the same pairs.
      ops::matmul_packed_residual(host(), x, packed, b, ar, DType::kBF16);
      ops::matmul_packed_residual(host(), xr, reference, b, a, DType::kBF16);
      EXPECT_EQ(std::memcmp(a.raw(), ar.raw(), a.nbytes()), 0) << precision_name(f) << " residual, k " << k;
    }
  }
}

TEST(PackedFormat16, Bf16OperandsFlushSubnormalsToZero) {
  // A weight or activation below bf16's smallest normal (2^-126) reads as a zero of its sign on every arm, as
  // vdpbf16ps reads it (DAZ); the other products of the chain are unchanged.
  const float tiny = std::ldexp(1.0f, -130), normal = std::ldexp(1.0f, -120);
  EXPECT_TRUE(same_bits(bf16_operand_reference(tiny), 0.0f));
  EXPECT_TRUE(same_bits(bf16_operand_reference(-tiny), -0.0f));
  EXPECT_TRUE(same_bits(bf16_operand_reference(normal), normal));
  EXPECT_TRUE(same_bits(bf16_operand(-tiny), -0.0f));
  EXPECT_TRUE(same_bits(bf16_operand(std::numeric_limits<float>::min()), std::numeric_limits<float>::min()));
  Tensor w = Tensor::empty({2, 4}), x = Tensor::empty({1, 4});
  const float wv[] = {tiny, 1.0f, 2.0f, -tiny, 0.5f, 0.25f, 3.0f, 1.0f};
  const float xv[] = {1e30f, tiny, 1.0f, 1e30f};
  std::copy(wv, wv + 8, w.data<float>());
  std::copy(xv, xv + 4, x.data<float>());
  ops::PackedWeight packed;
  ops::pack_weight(host(), w, packed, DType::kBF16);
  const Tensor q = ops::unpack_weight(host(), packed);
  EXPECT_TRUE(same_bits(q.data<float>()[0], 0.0f));
  EXPECT_TRUE(same_bits(q.data<float>()[3], -0.0f));
  Tensor y = Tensor::empty({1, 2});
  ops::matmul_packed(host(), x, packed, y);
  // Row 0: tiny*1e30 and -tiny*1e30 read as 0; 1 * tiny reads as 0; 2 * 1 = 2.
  EXPECT_EQ(y.data<float>()[0], 2.0f);
  EXPECT_EQ(y.data<float>()[1], bf16_round_reference(0.5f * bf16_round_reference(1e30f)) + 3.0f + bf16_round_reference(1e30f));
}

TEST(RmsNormRounding, EqualsTheHuggingFaceBf16Expression) {
  Rng rng(15);
  const Tensor x = rng.normal({11, 54}), weight = rng.normal({54}, 0.5f);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    auto round = [&](float v) { return dt == DType::kBF16 ? bf16_round_reference(v) : f16_round_reference(v); };
    Tensor out = Tensor::empty({11, 54}), rstd = Tensor::empty({11}), out32 = Tensor::empty({11, 54});
    Tensor rstd32 = Tensor::empty({11});
    ops::rmsnorm_forward(host(), x, weight, 1e-5f, out, rstd, dt);
    ops::rmsnorm_forward(host(), x, weight, 1e-5f, out32, rstd32);
    EXPECT_EQ(std::memcmp(rstd.raw(), rstd32.raw(), rstd.nbytes()), 0);  // the statistics stay fp32
    for (int64_t i = 0; i < 11; ++i)
      for (int64_t j = 0; j < 54; ++j) {
        const float want = round(round(weight.data<float>()[j]) * round(x.data<float>()[i * 54 + j] * rstd.data<float>()[i]));
        ASSERT_TRUE(same_bits(out.data<float>()[i * 54 + j], want)) << dtype_name(dt) << " " << i << "," << j;
      }
  }
}

TEST(PagedKvCache16, AttentionEqualsTheTrainingAttentionOnRoundedKeys) {
  // One sequence of 12 tokens in a 16-bit cache of block size 1 (blocks shuffled) against attention_forward on
  // the same k, v rounded: the values each reads are identical, so the outputs are the same bits.
  Rng rng(16);
  const int64_t T = 12, Hq = 4, Hkv = 2, D = 17;
  const Tensor q = rng.normal({T, Hq, D}), k = rng.normal({T, Hkv, D}), v = rng.normal({T, Hkv, D});
  std::vector<int32_t> order(T), positions(T), seq(T, 0), slots(T);
  for (int64_t i = 0; i < T; ++i) order[i] = static_cast<int32_t>((i * 5 + 3) % T);
  for (int64_t i = 0; i < T; ++i) positions[i] = static_cast<int32_t>(i), slots[i] = order[i];
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Tensor kr = k.clone(), vr = v.clone();
    ops::round_to(host(), kr, dt);
    ops::round_to(host(), vr, dt);
    Tensor k_cache = Tensor::zeros({T, Hkv, D}, dt), v_cache = Tensor::zeros({T, Hkv, D}, dt);
    ops::paged_kv_write(host(), k, v, testing::int_tensor(slots), k_cache, v_cache);  // rounds on the way in
    Tensor paged = Tensor::empty({T, Hq, D}), full = Tensor::empty({T, Hq, D}), lse = Tensor::empty({T, Hq});
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    ops::paged_attention(host(), q, k_cache, v_cache, testing::int_tensor(seq), testing::int_tensor(positions),
                         testing::int_tensor({0, static_cast<int32_t>(T)}), testing::int_tensor(order), 1, scale,
                         paged);
    ops::attention_forward(host(), q, kr, vr, testing::int_tensor({0, static_cast<int32_t>(T)}), scale, full, lse);
    EXPECT_EQ(std::memcmp(paged.raw(), full.raw(), full.nbytes()), 0) << dtype_name(dt);
    // ... and differ from the unrounded attention (the cache really holds 16-bit values).
    Tensor exact = Tensor::empty({T, Hq, D});
    ops::attention_forward(host(), q, k, v, testing::int_tensor({0, static_cast<int32_t>(T)}), scale, exact, lse);
    EXPECT_NE(std::memcmp(paged.raw(), exact.raw(), exact.nbytes()), 0) << dtype_name(dt);
  }
  Tensor bad = Tensor::zeros({T, Hkv, D}, DType::kI32);
  EXPECT_THROW(ops::paged_kv_write(host(), k, v, testing::int_tensor(slots), bad, bad), Error);
}

}  // namespace
}  // namespace rlcpp
