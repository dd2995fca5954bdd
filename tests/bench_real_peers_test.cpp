// The comparison code of the real peers (bench/real_peers.h) on fixed inputs: which way a ratio goes for a rate
// and for a time, what a peer's JSON yields (its figure, name, version, threads; a failed mode or a skipped run
// becomes the reason, never a figure), and that an unknown or uninstalled peer is said so.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "bench/real_peers.h"
#include "core/error.h"

namespace rlcpp::bench {
namespace {

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

PeerRun ran(const std::string& peer, const std::string& json) { return {peer, Json::parse(json), ""}; }

TEST(RealPeers, ARatioSaysHowManyTimesFasterRlcppIsForRatesAndForTimes) {
  PeerFigure slow{"llama.cpp 0.3.36 (f32, 2 threads)", 250, ""};
  PeerFigure absent{"vllm", 0, "not installed (run scripts/install_peers.sh)"};
  const std::vector<std::string> rates = comparison_rows("rlcpp (fp32)", 1000, {slow, absent}, "tok/s", true);
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_TRUE(has(rates[0], "rlcpp (fp32)") && has(rates[0], "1000 tok/s")) << rates[0];
  EXPECT_TRUE(has(rates[1], "250 tok/s") && has(rates[1], "rlcpp 4.00x")) << rates[1];
  EXPECT_TRUE(has(rates[2], "vllm") && has(rates[2], "did not run: not installed")) << rates[2];
  EXPECT_FALSE(has(rates[2], "x ")) << rates[2];

  // A time: the peer's 1100 ms against rlcpp's 100 ms is rlcpp 11x faster; a faster peer gives a ratio < 1.
  const std::vector<std::string> times =
      comparison_rows("rlcpp split", 100, {{"trl 1.16.0", 1100, ""}, {"fast", 50, "note"}}, "ms", false);
  EXPECT_TRUE(has(times[1], "rlcpp 11.00x")) << times[1];
  EXPECT_TRUE(has(times[2], "rlcpp 0.50x") && has(times[2], "note")) << times[2];
}

TEST(RealPeers, AFigureComesFromThePeersJsonWithItsVersionAndThreads) {
  const PeerFigure v = peer_figure(
      ran("vllm", R"({"peer":"vllm","vllm":"0.32.0","torch":"2.13.0","dtype":"float32","threads":2,"tokens_per_s":12497.5})"),
      "tokens_per_s");
  EXPECT_TRUE(v.measured());
  EXPECT_DOUBLE_EQ(v.value, 12497.5);
  EXPECT_EQ(v.name, "vllm 0.32.0 (float32, 2 threads)");

  // A dotted key into a mode, whose own thread count wins; a mode that failed gives its error as the reason.
  const PeerRun torch2 = ran("pytorch2", R"({"torch":"2.15.0","threads_option":"best","modes":{
      "eager":{"ms":181.4,"tokens_per_s":6349.0,"threads":2},
      "compile":{"error":"BackendCompilerFailed: no C++ compiler"}}})");
  const PeerFigure eager = peer_figure(torch2, "modes.eager.tokens_per_s");
  EXPECT_DOUBLE_EQ(eager.value, 6349.0);
  EXPECT_EQ(eager.name, "pytorch2 2.15.0 (2 threads)");
  const PeerFigure compiled = peer_figure(torch2, "modes.compile.tokens_per_s");
  EXPECT_FALSE(compiled.measured());
  EXPECT_EQ(compiled.note, "failed: BackendCompilerFailed: no C++ compiler");

  EXPECT_FALSE(peer_figure(ran("trl", R"({"trl":"1.16.0"})"), "step_ms").measured());
  EXPECT_TRUE(has(peer_figure(ran("trl", R"({"trl":"1.16.0"})"), "step_ms").note, "no 'step_ms'"));
  EXPECT_FALSE(peer_figure(ran("trl", R"({"step_ms":-3})"), "step_ms").measured());
  EXPECT_FALSE(peer_figure(ran("trl", R"({"step_ms":"fast"})"), "step_ms").measured());
  const PeerFigure skipped = peer_figure({"llama.cpp", nullptr, "failed (exit status 1): ImportError: llama_cpp"},
                                         "tokens_per_s");
  EXPECT_FALSE(skipped.measured());
  EXPECT_EQ(skipped.note, "failed (exit status 1): ImportError: llama_cpp");
}

TEST(RealPeers, PeerListsAreCheckedAgainstTheBenchsChoices) {
  EXPECT_EQ(real_peers_in("torch,llama.cpp,vllm", {"llama.cpp", "vllm"}),
            (std::vector<std::string>{"llama.cpp", "vllm"}));
  EXPECT_TRUE(real_peers_in("torch", {"trl"}).empty());
  try {
    real_peers_in("torch,trl", {"llama.cpp", "vllm"});
    FAIL() << "trl accepted as a rollout peer";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "'trl' is not a peer of this bench (choices: torch, llama.cpp, vllm)")) << e.what();
  }
  EXPECT_TRUE(list_has("torch,trl", "trl"));
  EXPECT_FALSE(list_has("torch,trl2", "trl"));
  EXPECT_THROW(run_real_peer("sglang", ""), Error);
}

TEST(RealPeers, APeerThatIsNotInstalledIsAReasonNotAFigure) {
  const char* before = std::getenv("RLCPP_PEERS_DIR");
  const std::string saved = before ? before : "";
  setenv("RLCPP_PEERS_DIR", "/nonexistent/rlcpp_peers", 1);
  const PeerRun run = run_real_peer("vllm", "rollout --checkpoint x");
  if (before)
    setenv("RLCPP_PEERS_DIR", saved.c_str(), 1);
  else
    unsetenv("RLCPP_PEERS_DIR");
  EXPECT_TRUE(run.result.is_null());
  EXPECT_TRUE(has(run.skipped, "not installed (/nonexistent/rlcpp_peers/vllm-venv")) << run.skipped;
  EXPECT_TRUE(has(run.skipped, "scripts/install_peers.sh")) << run.skipped;
}

}  // namespace
}  // namespace rlcpp::bench
