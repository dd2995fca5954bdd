#include "trainer/loss_normalizer.h"

#include "core/error.h"

namespace rlcpp {

namespace {

constexpr LossAgg kAllAggs[] = {LossAgg::kTokenMean, LossAgg::kSeqMeanTokenSum, LossAgg::kSeqMeanTokenMean,
                                LossAgg::kSeqMeanTokenSumNorm};

}  // namespace

const char* loss_agg_name(LossAgg agg) {
  switch (agg) {
    case LossAgg::kTokenMean: return "token-mean";
    case LossAgg::kSeqMeanTokenSum: return "seq-mean-token-sum";
    case LossAgg::kSeqMeanTokenMean: return "seq-mean-token-mean";
    case LossAgg::kSeqMeanTokenSumNorm: return "seq-mean-token-sum-norm";
  }
  return "?";
}

LossAgg parse_loss_agg(const std::string& text, const std::string& key) {
  std::string valid;
  for (LossAgg a : kAllAggs) {
    if (text == loss_agg_name(a)) return a;
    valid += std::string(valid.empty() ? "" : ", ") + "\"" + loss_agg_name(a) + "\"";
  }
  RLCPP_FAIL(key << ": unknown loss aggregation \"" << text << "\" (expected one of " << valid << ")");
}

void check_offsets(std::span<const int64_t> cu, size_t num_tokens, const char* what) {
  RLCPP_CHECK(!cu.empty() && cu.front() == 0, what << ": sequence offsets must start with 0 (got "
                                                   << (cu.empty() ? std::string("none") : std::to_string(cu.front()))
                                                   << ")");
  for (size_t i = 1; i < cu.size(); ++i)
    RLCPP_CHECK(cu[i] >= cu[i - 1], what << ": sequence offsets decrease at " << i << " (" << cu[i - 1] << " then "
                                         << cu[i] << ")");
  RLCPP_CHECK(static_cast<size_t>(cu.back()) == num_tokens,
              what << ": sequence offsets end at " << cu.back() << " but the per-token arrays have " << num_tokens
                   << " entries");
}

void check_token_array(std::span<const float> array, size_t num_tokens, const char* name, bool optional) {
  if (optional && array.empty()) return;
  RLCPP_CHECK(array.size() == num_tokens, name << " has " << array.size() << " entries, expected " << num_tokens
                                               << " (one per response token)");
}

LossNormalizer LossNormalizer::over_batch(LossAgg agg, std::span<const int64_t> cu, std::span<const float> mask,
                                          double token_sum_norm) {
  check_offsets(cu, mask.size(), "LossNormalizer::over_batch");
  LossNormalizer n;
  n.agg = agg;
  if (agg == LossAgg::kSeqMeanTokenSumNorm) {
    RLCPP_CHECK(token_sum_norm > 0, "loss aggregation seq-mean-token-sum-norm needs a positive token_sum_norm "
                                    "(a constant such as the maximum response length), got "
                                        << token_sum_norm);
    n.token_sum_norm = token_sum_norm;
  }
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    double seq_tokens = 0;
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) {
      RLCPP_CHECK(mask[t] >= 0, "mask[" << t << "] = " << mask[t] << " is negative");
      seq_tokens += mask[t];
    }
    n.num_tokens += seq_tokens;
    n.num_seqs += seq_tokens > 0 ? 1 : 0;
  }
  return n;
}

void LossNormalizer::merge(const LossNormalizer& shard) {
  RLCPP_CHECK(shard.agg == agg, "cannot merge a " << loss_agg_name(shard.agg) << " normaliser into a "
                                                  << loss_agg_name(agg) << " one");
  RLCPP_CHECK(shard.token_sum_norm == token_sum_norm, "cannot merge normalisers with token_sum_norm "
                                                          << shard.token_sum_norm << " and " << token_sum_norm);
  num_tokens += shard.num_tokens;
  num_seqs += shard.num_seqs;
}

std::vector<double> LossNormalizer::token_weights(std::span<const int64_t> cu, std::span<const float> mask) const {
  check_offsets(cu, mask.size(), "LossNormalizer::token_weights");
  std::vector<double> w(mask.size(), 0.0);
  if (agg == LossAgg::kTokenMean) {
    if (num_tokens <= 0) return w;
    for (size_t t = 0; t < mask.size(); ++t) w[t] = mask[t] / num_tokens;
    return w;
  }
  if (num_seqs <= 0) return w;
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    double seq_tokens = 0;
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) seq_tokens += mask[t];
    if (seq_tokens <= 0) continue;
    double per_seq = 1.0 / num_seqs;  // kSeqMeanTokenSum
    if (agg == LossAgg::kSeqMeanTokenMean) per_seq /= seq_tokens;
    if (agg == LossAgg::kSeqMeanTokenSumNorm) per_seq /= token_sum_norm;
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) w[t] = mask[t] * per_seq;
  }
  return w;
}

}  // namespace rlcpp
