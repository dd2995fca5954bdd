// The `agent` section of a run config: multi-turn episodes instead of one prompt -> one response
// (agent/README.md). agent.env "" keeps a run single-turn.
#pragma once

#include <cstdint>
#include <string>

namespace rlcpp {

struct AgentConfig {
  std::string env;                 // "" (single-turn), "calc", "guess", "remote" or "http"
  int64_t max_turns = 8;           // assistant turns per episode
  int64_t max_tokens = 0;          // an episode's tokens, prompt included; 0 = the engine's context
  int64_t max_turn_tokens = 16;    // tokens sampled per assistant turn
  double call_timeout_s = 30;      // an environment call's deadline (remote: the reply's; in-process: checked after)
  std::string tokenization = "tito";  // tito | retokenize (the lab's contrast: agent/retokenize.h)
  int64_t turns_per_draw = 0;      // 0: episodes end within their draw; N: at most N turns per draw, then on
                                   // into the next step's draw with the policy then (partial rollouts)
  int64_t tokens_per_draw = 0;     // http: at most N tokens sampled per session per draw; a turn that reaches
                                   // them goes on in the next draw under the new version (0: none cut)
  std::string endpoint;            // remote: the environment server (tcp://HOST:PORT or ipc://PATH)
  double demo_tool_share = 0.5;    // calc demonstrations (SFT warm start): the share that calls the calculator
  double demo_bisect_share = 0.5;  // guess demonstrations: the share of turns that guess the interval's middle
  std::string guess_feedback = "sign";  // guess: "sign" ("+" / "-") or "interval" ("(501 999)": the range left)
  std::string harness;             // http: the harness's shell command (loop/harness_rollout.h)
  double harness_timeout_s = 600;  // http: a draw's harness is killed past it

  bool enabled() const { return !env.empty(); }
  // Episodes played by an external harness over rlcpp serve's OpenAI API, not by an environment in reach.
  bool harness_mode() const { return env == "http"; }
  // Episodes may run on past the draw that began them (partial rollouts).
  bool spans_draws() const { return turns_per_draw > 0 || tokens_per_draw > 0; }
  // Throws naming the key (under `prefix`) of a bad value.
  void validate(const std::string& prefix = "agent") const;

  template <class V> void visit(V& v) {
    v("env", env,
      "multi-turn episodes: \"calc\" (an arithmetic task with a calculator tool), \"guess\" (task guess: find a "
      "hidden number from higher/lower feedback), \"remote\" (reset/step over ZeroMQ, agent.endpoint), \"http\" (an "
      "external agent harness, agent.harness, plays them over rlcpp serve's OpenAI API); \"\" = one prompt, one "
      "response");
    v("max_turns", max_turns, "assistant turns per episode; an episode still running after them is truncated");
    v("max_tokens", max_tokens,
      "an episode's tokens, prompt, turns and observations together (0 = the engine's context); past it the "
      "episode is truncated");
    v("max_turn_tokens", max_turn_tokens, "tokens sampled per assistant turn");
    v("call_timeout_s", call_timeout_s,
      "an environment call's deadline in seconds: a remote environment's reply later than this ends that episode "
      "as failed (agent/env_failures) and the run goes on; an in-process call is checked when it returns");
    v("tokenization", tokenization,
      "tito: the trainer trains on the token ids the engine sampled and the environment's tokens as appended; "
      "retokenize: as frameworks did, each turn decoded, the conversation re-rendered with the chat template and "
      "tokenized again (needs a tokenizer.json with Qwen3's chat template; the mismatch lab's contrast: "
      "agent/retokenized_frac)");
    v("turns_per_draw", turns_per_draw,
      "0: every episode ends within the step that drew it; N: at most N turns per step, the rest run on in the "
      "next step's draw with the policy synced then, each token keeping the version that sampled it (saved in "
      "checkpoints, resumed bit for bit); http: one harness for the run, each session's requests past N in a draw "
      "wait while the trainer updates and the weights are synced, and run under the new version");
    v("tokens_per_draw", tokens_per_draw,
      "http, one harness for the run: at most N tokens sampled per session per draw; a turn that reaches them is "
      "kept, its request open while the trainer updates and the weights are synced, and goes on in the next draw "
      "under the new version (each token keeping the version that sampled it); 0: a turn runs to its end under "
      "the version that began it");
    v("endpoint", endpoint, "remote: the environment server's endpoint (tcp://HOST:PORT or ipc://PATH)");
    v("demo_tool_share", demo_tool_share,
      "calc, SFT warm start: share of demonstrations that call the calculator (the rest answer at once)");
    v("harness", harness,
      "http: the harness's shell command, run once per draw (once for the run with agent.turns_per_draw or "
      "agent.tokens_per_draw > 0, its "
      "episodes arriving as each step draws them, its reward lines read as they come): it reads the draw's episodes as JSON lines on stdin "
      "({\"session\", \"item\", \"episode\", \"prompt\", \"answer\", \"meta\"}), plays each against "
      "$OPENAI_BASE_URL with the header \"X-Session-Id: SESSION\", and writes one line {\"session\", \"reward\"} per "
      "episode on stdout (README \"Agent harnesses\")");
    v("harness_timeout_s", harness_timeout_s, "http: a draw's harness still running after this many seconds (with "
      "agent.turns_per_draw or tokens_per_draw: a draw not ended after them) is killed and the run stops with its "
      "error");
    v("demo_bisect_share", demo_bisect_share,
      "guess, SFT warm start: share of demonstrated guesses at the middle of the interval left (the rest uniform "
      "inside it)");
    v("guess_feedback", guess_feedback,
      "guess: the feedback on a wrong guess, \"sign\" (\"+\" the number is higher, \"-\" lower: the model keeps "
      "track of the range left) or \"interval\" (the range left, written as the prompt writes [0, 999]: "
      "\"(501 999)\")");
  }
};

}  // namespace rlcpp
