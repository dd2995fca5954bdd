// Sessions: the engine keeps a sequence, and the paged K/V blocks of its tokens, from one turn to the next
// (rollout/README.md "Sessions"). A multi-turn episode (agent/), or an HTTP conversation of `rlcpp serve`,
// opens one with its prompt, then alternates: append tokens of known origin (an observation, a tool's reply: only
// they are prefilled) and run a turn (the engine samples until the turn ends); close frees the blocks. The
// history is never prefilled again unless its K/V were taken (an idle session evicted for memory, a preemption)
// or went stale (the weights changed: K/V of an older policy version is never reused). Every token after the
// prompt records its origin and the policy version that sampled it; the samples are the same whatever the
// batching, preemption or eviction (Philox keys by position, batch-invariant log-probs).
#pragma once

#include <cstdint>
#include <vector>

#include "rollout/request.h"
#include "rollout/sequence.h"

namespace rlcpp {

// Who a session samples as: its draws are keyed by (sampling.seed, prompt_id, sample_index, position), so a
// group's episodes differ by sample_index and an episode's turns never reuse a draw.
struct SessionSpec {
  std::vector<int32_t> prompt;  // BOS included by the caller
  uint64_t prompt_id = 0;
  int64_t sample_index = 0;
};

// One turn of one session: sample until EOS (unless ignore_eos), a stop token, sampling.max_new_tokens new tokens
// in this turn, or a full context. Turns of sessions opened together with the same prompt and id, fresh, share
// one prefill of it (a GRPO group's first turn).
struct TurnRequest {
  int64_t session = 0;
  SamplingParams sampling;
};

struct TurnResult {
  int64_t session = 0;
  std::vector<int32_t> tokens;  // the turn's sampled tokens, the one that ended it included
  std::vector<float> logprobs;  // as Sample::logprobs
  FinishReason finish_reason = FinishReason::kLength;
  int64_t policy_version = 0;   // of every token of the turn (the engine's weights do not change within a call)
  int64_t prefilled_tokens = 0;     // rows computed to admit the turn: the appended tokens (+ the last sampled one)
  int64_t recomputed_tokens = 0;    // of which were computed before (evicted, preempted, stale)
};

// A session's sequence as the engine holds it (read-only): its tokens with their origins, log-probs and
// versions, and how many times each position's K/V was computed.
struct SessionView {
  const Sequence& sequence;
  int64_t kv_version = -1;  // the policy version its cached K/V were computed with (-1: none cached)
  double idle_s = 0;        // since its last turn ended or it was opened
};

}  // namespace rlcpp
