// The real systems rlcpp's benchmarks run beside it (issue 16): PyTorch 2 (eager and torch.compile) for
// training, llama.cpp and vLLM for rollout, TRL's GRPOTrainer for a GRPO step. Each is a script in bench/peers/
// run by the Python of its virtual environment (scripts/install_peers.sh, under build/peers/), printing one
// JSON object; here: which script and environment each peer needs, running it, reading its figure, and the
// rows that set it beside rlcpp's as a ratio. A peer that is not installed or fails is a row saying so, with
// its error, never a figure from something else.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp::bench {

// The peers' virtual environments: $RLCPP_PEERS_DIR, else SOURCE/build/peers.
std::string peers_dir();

struct PeerRun {
  std::string peer;     // "pytorch2", "trl", "llama.cpp", "vllm", "hf", "pytorch-gpu", "hf-pytorch"
  Json result;          // the peer's JSON object; null when it did not run
  std::string skipped;  // why not: "not installed (...)", or its exit status and last lines of stderr
};

// Runs peer `peer`'s script with `args` (its command and options). Throws for a name that is no peer.
PeerRun run_real_peer(const std::string& peer, const std::string& args);

// The real peers named in a comma-separated --peers list, in order; "torch" (the Debian PyTorch 1.13 peer the
// benches always had) is left to the caller. Throws naming an unknown name and the choices.
std::vector<std::string> real_peers_in(const std::string& list, const std::vector<std::string>& allowed);
bool list_has(const std::string& list, const std::string& name);

// One side of a comparison: a figure (tokens/s or ms) with how it was measured, or why there is none.
struct PeerFigure {
  std::string name;    // "vllm 0.32.0 (float32, 2 threads)"
  double value = 0;    // > 0 when measured
  std::string note;    // measured: details; not measured: the reason
  bool measured() const { return value > 0; }
};

// The figure of a peer's result: `key` ("tokens_per_s", "ms", or "modes.compile.tokens_per_s") from its JSON,
// named with its version and threads; unmeasured (with the reason) when the run was skipped or lacks the key
// (a mode's {"error"} becomes the reason).
PeerFigure peer_figure(const PeerRun& run, const std::string& key);

// The comparison rows: rlcpp's figure, then each peer's with "rlcpp R.RRx" (R = rlcpp/peer for a rate,
// peer/rlcpp for a time, so > 1 means rlcpp is faster) or "did not run: REASON". `unit` "tok/s" or "ms".
std::vector<std::string> comparison_rows(const std::string& rlcpp_name, double rlcpp_value,
                                         const std::vector<PeerFigure>& peers, const std::string& unit,
                                         bool higher_is_better);

}  // namespace rlcpp::bench
