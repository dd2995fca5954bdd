// `rlcpp report`: from a short real `rlcpp train` run, report.md and every plot exist, each PNG decodes and is
// not blank (tests/png_check.py: signature, CRCs, IHDR, zlib, row filters, pixels; no matplotlib involved), the
// ledger is printed when the run starts and lands in the report with the engine's KV count; two runs overlay
// into one report; a directory without metrics.jsonl and a malformed line are errors naming file and line.
// Under ctest every case is its own process, so only the cases that need the two short runs make them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app_test_support.h"
#include "core/config.h"
#include "report/mismatch_section.h"
#include "report/run_ledger.h"
#include "report/run_report.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

// The line of `text` holding `needle` ("" when none).
std::string line_with(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool python_has_matplotlib() {
  return std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
}

// The PNG's signature and IHDR read here; width and height from IHDR.
void expect_png_header(const fs::path& path, uint32_t& width, uint32_t& height) {
  const std::string bytes = read_text(path);
  ASSERT_GE(bytes.size(), 33u) << path;
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
  EXPECT_EQ(bytes.substr(12, 4), "IHDR") << path;
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  EXPECT_EQ(be32(8), 13u) << path;  // IHDR length
  width = be32(16);
  height = be32(20);
}

// tests/png_check.py on `files`: one JSON object per file.
std::vector<Json> check_pngs(const std::vector<std::string>& files) {
  std::string cmd = "/usr/bin/python3 " RLCPP_SOURCE_DIR "/tests/png_check.py";
  for (const std::string& f : files) cmd += " '" + f + "'";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  EXPECT_EQ(pclose(pipe), 0) << out;
  std::vector<Json> results;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) results.push_back(Json::parse(line));
  return results;
}

// Every plot of a report exists, decodes and holds a picture (more than one colour, more than 2 % of the
// pixels off the background: axes, ticks, labels and the data).
void expect_plots_decode(const fs::path& out) {
  std::vector<std::string> files;
  for (const std::string& name : report_plot_names()) {
    const fs::path png = out / "plots" / (name + ".png");
    ASSERT_TRUE(fs::exists(png)) << png;
    uint32_t w = 0, h = 0;
    expect_png_header(png, w, h);
    EXPECT_GE(w, 400u) << png;
    EXPECT_GE(h, 300u) << png;
    files.push_back(png.string());
  }
  const std::vector<Json> results = check_pngs(files);
  ASSERT_EQ(results.size(), files.size());
  for (const Json& r : results) {
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
    if (!r["ok"].get<bool>()) continue;
    EXPECT_GT(r["distinct_colors"].get<int64_t>(), 16) << r.dump();
    EXPECT_GT(r["non_background_fraction"].get<double>(), 0.02) << r.dump();
  }
}

// A fresh `dir` holding `ckpt/`, a random W1 model, for short runs of configs/grpo_add3_benchmark.json from it.
void make_run_dir(const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  save_model_checkpoint((dir / "ckpt").string(), init_random(model_preset("tiny"), 1));
}

// `rlcpp train` of the benchmark recipe from `dir`/ckpt (no warm start, 8 prompts a step) into `dir`/`name`, with
// the extra `--set`s; what it printed. Fails the caller when the run fails.
std::string train_short_run(const fs::path& dir, const std::string& name, const std::string& sets) {
  const std::string cmd = std::string("train " RLCPP_SOURCE_DIR "/configs/grpo_add3_benchmark.json") +
                          " --set warm_start.enabled=false --set init_checkpoint=" + (dir / "ckpt").string() +
                          " --set rollout.prompts_per_step=8 " + sets + " --set run_dir=" + (dir / name).string();
  const CliResult r = run_cli(cmd);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.output;
  return r.output;
}

class ReportTest : public ::testing::Test {
 protected:
  // Two short real runs shared by the tests: split (the default placement) and colocated.
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("rlcpp_report_" + std::to_string(::getpid()));
    make_run_dir(dir_);
    for (const char* placement : {"split", "colocated"})
      train_output_[placement] = train_short_run(dir_, placement,
                                                 "--set steps=3 --set eval_every=2 --set eval_size=40 --set "
                                                 "samples_per_step=8 --set ppo.mini_batch_size=32 --set "
                                                 "rollout.placement=" + std::string(placement));
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    if (!python_has_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 cannot import matplotlib (python3-matplotlib)";
  }

  static fs::path dir_;
  static std::map<std::string, std::string> train_output_;
};
fs::path ReportTest::dir_;
std::map<std::string, std::string> ReportTest::train_output_;

TEST_F(ReportTest, TrainPrintsTheLedgerAtTheStart) {
  const std::string& out = train_output_["split"];
  const size_t ledger = out.find("ledger (V=32 C=128 L=4 Hq=4 Hkv=2 d=32 F=352");
  ASSERT_NE(ledger, std::string::npos) << out;
  EXPECT_LT(ledger, out.find("step    1/3")) << "the ledger comes before the first step\n" << out;
  // Formula and count of the parameters; the KV formula with W1's numbers put in (the engine's count comes
  // with the first rollout).
  EXPECT_EQ(count_of(line_with(out, "parameters N"), "742,528"), 2u) << out;
  EXPECT_NE(line_with(out, "KV cache per token").find("2·L·Hkv·d·bytes = 2·4·2·32·4"), std::string::npos) << out;
  const Json ledger_json = load_json_file((dir_ / "split" / "ledger.json").string());
  EXPECT_EQ(ledger_json["parameters_counted"].get<int64_t>(), 742528);
  EXPECT_GT(ledger_json["machine"]["matmul_peak_flops"].get<double>(), 1e7);
  EXPECT_GT(ledger_json["machine"]["copy_bandwidth_bytes_per_s"].get<double>(), 1e7);
  // Every step records the trainer's resident memory and the engine's own KV count.
  std::ifstream metrics(dir_ / "split" / "metrics.jsonl");
  int steps = 0;
  for (std::string line; std::getline(metrics, line); ++steps) {
    const Json m = Json::parse(line);
    EXPECT_GT(m["memory/rss_bytes"].get<double>(), 1 << 20) << line;
    EXPECT_EQ(m["rollout/kv_bytes_per_token"].get<double>(), 2048) << line;
    EXPECT_GT(m["engine/steps"].get<double>(), 0) << line;
    // A group's samples share its prompt's prefill; every prompt is looked up in the prefix cache (on by default).
    EXPECT_GT(m["rollout/prefill_tokens_saved"].get<double>(), 0) << line;
    EXPECT_EQ(m["rollout/prefix_cache_queried_tokens"].get<double>(), m["rollout/prefill_tokens"].get<double>() +
                                                                          m["rollout/prefix_cache_hit_tokens"].get<double>())
        << line;
    EXPECT_GE(m["rollout/prefix_cache_hit_rate"].get<double>(), 0) << line;
  }
  EXPECT_EQ(steps, 3);
}

TEST_F(ReportTest, ReportOfAShortRunHasEveryFileAndEveryPngDecodes) {
  const fs::path run = dir_ / "split";
  CliResult r = run_cli("report " + run.string());
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(fs::exists(run / "report.md")) << r.output;
  ASSERT_TRUE(fs::exists(run / "plots" / "plot_data.json"));
  expect_plots_decode(run);

  const std::string md = read_text(run / "report.md");
  for (const std::string& name : report_plot_names())
    EXPECT_NE(md.find("(plots/" + name + ".png)"), std::string::npos) << name;
  for (const char* section :
       {"## Summary", "## Where a step's time goes", "## KV reuse", "## Ledger", "## Rollout vs trainer"})
    EXPECT_NE(md.find(section), std::string::npos) << section;
  // The ledger in the report: the parameters formula and count, the KV formula against the engine's count
  // (from metrics.jsonl), and measured MFU and decode-floor ratios.
  EXPECT_NE(md.find("| 742,528 | counted in the parameter store | 742,528 | measured/formula 1 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| 2,048 B | the rollout engine's own count | 2,048 B | measured/formula 1 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| training FLOP/s (MFU) |"), std::string::npos);
  EXPECT_EQ(md.find("MFU — |"), std::string::npos) << "MFU must be measured\n" << md;
  EXPECT_EQ(md.find("measured/floor — |"), std::string::npos) << "the decode step must be measured\n" << md;

  // The plot data holds the run's own figures: 3 steps, held-out accuracy at steps 2 and 3, phase shares that
  // add up to one step.
  const Json data = load_json_file((run / "plots" / "plot_data.json").string());
  ASSERT_EQ(data["runs"].size(), 1u);
  const Json& s = data["runs"][0];
  EXPECT_EQ(s["label"], "split");
  EXPECT_EQ(s["step"], Json::parse("[1, 2, 3]"));
  EXPECT_EQ(s["eval"]["step"], Json::parse("[2, 3]"));
  for (size_t step = 0; step < 3; ++step) {
    double sum = 0;
    for (const Json& row : s["phases"]["shares"]) sum += row[step].get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-6) << "step " << step + 1;
  }
  EXPECT_EQ(s["sampled_lengths"]["tokens"].size(), 24u);  // 8 samples a step
}

TEST_F(ReportTest, TwoRunsOverlayInOneReport) {
  const fs::path out = dir_ / "overlay";
  CliResult r = run_cli("report " + (dir_ / "split").string() + " " + (dir_ / "colocated").string() + " --out " +
                        out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  expect_plots_decode(out);
  const std::string md = read_text(out / "report.md");
  EXPECT_NE(md.find("# rlcpp run report: split vs colocated"), std::string::npos) << md;
  EXPECT_NE(md.find("### split"), std::string::npos);
  EXPECT_NE(md.find("### colocated"), std::string::npos);
  const Json data = load_json_file((out / "plots" / "plot_data.json").string());
  ASSERT_EQ(data["runs"].size(), 2u);
  EXPECT_EQ(data["runs"][0]["label"], "split");
  EXPECT_EQ(data["runs"][1]["label"], "colocated");

  CliResult no_out = run_cli("report " + (dir_ / "split").string() + " " + (dir_ / "colocated").string());
  EXPECT_NE(no_out.status, 0);
  EXPECT_NE(no_out.output.find("--out"), std::string::npos) << no_out.output;
}

// The phase shares of a step line (the field before "| sampled": "rollout 33% ... other 2%"), by name.
std::map<std::string, int> step_line_shares(const std::string& line) {
  std::map<std::string, int> shares;
  const size_t end = line.find(" | sampled");
  if (end == std::string::npos) return shares;
  const size_t begin = line.rfind(" | ", end - 1) + 3;
  std::istringstream fields(line.substr(begin, end - begin));
  for (std::string name, percent; fields >> name >> percent;) {
    if (percent.rfind("(+", 0) == 0) fields >> percent;  // "(+N% hidden)" after the rollout's share (async)
    shares[name] = std::stoi(percent);
  }
  return shares;
}

// Every step line shows the phases that took time, `other` among them, as whole percents that add up to 100; the
// rollout's and the update's throughputs are named for what they count.
TEST_F(ReportTest, StepLineSharesAddUpTo100) {
  for (const auto& [placement, output] : train_output_) {
    std::istringstream lines(output);
    int step_lines = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("step ", 0) != 0 || line.find("| reward") == std::string::npos) continue;
      ++step_lines;
      const std::map<std::string, int> shares = step_line_shares(line);
      int sum = 0;
      for (const auto& [name, percent] : shares) sum += percent;
      EXPECT_EQ(sum, 100) << placement << ": " << line;
      for (const char* phase : {"rollout", "other"}) EXPECT_TRUE(shares.count(phase)) << phase << ": " << line;
      EXPECT_NE(line.find("| sampled "), std::string::npos) << line;
      EXPECT_NE(line.find(" tok/s | trained "), std::string::npos) << line;
    }
    EXPECT_EQ(step_lines, 3) << output;
  }
}

// The ledger's training MFU is 6N times the trained tokens (through forward + backward) per second of update,
// over the matmul peak the run measured (ledger.json), and stays well below twice it.
TEST_F(ReportTest, TrainingMfuCountsTrainedTokensOverThePeakTheRunMeasured) {
  const fs::path run = dir_ / "split";
  CliResult r = run_cli("report " + run.string());
  ASSERT_EQ(r.status, 0) << r.output;
  // The peak: the larger of the run's two measurements, at its start and after its last step.
  const Json machine = load_json_file((run / "ledger.json").string())["machine"];
  const double peak = machine["matmul_peak_flops"].get<double>();
  EXPECT_EQ(peak, std::max(machine["matmul_peak_flops_start"].get<double>(),
                           machine["matmul_peak_flops_end"].get<double>()));
  double trained = 0, update_s = 0;
  std::ifstream metrics(run / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const Json m = Json::parse(line);
    // No dynamic sampling and one epoch here: every sampled sequence goes through forward + backward once.
    EXPECT_EQ(m["tokens/trained"].get<double>(), m["tokens/sequences"].get<double>()) << line;
    EXPECT_EQ(m["tokens/sampled"].get<double>(), m["rollout/generated_tokens"].get<double>()) << line;
    EXPECT_NEAR(m["tokens_per_s/trained"].get<double>(),
                m["tokens/trained"].get<double>() / m["timing_s/update_actor"].get<double>(),
                1e-9 * m["tokens_per_s/trained"].get<double>())
        << line;
    trained += m["tokens/trained"].get<double>();
    update_s += m["timing_s/update_actor"].get<double>();
  }
  const double mfu = 6 * 742528 * trained / update_s / peak;
  const RunRecords records = read_run_records(run.string());
  const std::vector<LedgerLine> ledger =
      build_ledger(run_model_config(records), run_ledger_figures(records, MachineFigures{}));
  EXPECT_NEAR(ledger_line(ledger, "train_mfu").ratio, mfu, 1e-9 * mfu);
  EXPECT_GT(mfu, 0.0);
  // rlcpp's packed kernel can run above the OpenBLAS sgemm peak the run measures (bench/RESULTS.md: W1's step at
  // 134-157 % of it), and a peak measured beside other work reads low (1.14 once in a full ctest); twice it would
  // be a counting error (tokens or FLOPs counted twice).
  EXPECT_LT(mfu, 2.0) << "the training MFU is twice the matmul peak the run measured";
  char cell[64];
  std::snprintf(cell, sizeof cell, "| MFU %.3g %% |", 100 * mfu);
  EXPECT_NE(line_with(read_text(run / "report.md"), "| training FLOP/s (MFU) |").find(cell), std::string::npos)
      << cell << "\n" << read_text(run / "report.md");
}

// A run whose engine and trainer compute the same bits has no mismatch section, no section data and no section
// plots.
TEST_F(ReportTest, AZeroMismatchRunHasNoMismatchSection) {
  const fs::path run = dir_ / "split";
  CliResult r = run_cli("report " + run.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string md = read_text(run / "report.md");
  EXPECT_EQ(md.find("## Mismatch:"), std::string::npos) << md;
  const Json data = load_json_file((run / "plots" / "plot_data.json").string());
  EXPECT_EQ(data["runs"][0]["mismatch_section"], Json::parse(R"({"present": false})"));
  for (const std::string& name : report_mismatch_plot_names())
    EXPECT_FALSE(fs::exists(run / "plots" / (name + ".png"))) << name;
}

// A run with a mismatch (a bf16 trainer against an fp32 engine, two steps): the report's mismatch section has its
// figures, where it enters, and its plots.
class MismatchReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("rlcpp_report_mismatch_" + std::to_string(::getpid()));
    make_run_dir(dir_);
    train_short_run(dir_, "bf16",
                    "--set steps=2 --set eval_every=0 --set eval_size=20 --set ppo.mini_batch_size=64 "
                    "--set rollout.placement=colocated --set trainer.dtype=bf16");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    if (!python_has_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 cannot import matplotlib (python3-matplotlib)";
  }
  static fs::path dir_;
};
fs::path MismatchReportTest::dir_;

// A bf16 trainer's MFU is against the bf16 product's peak the run measured (sgemm's would flatter it: the packed bf16
// product runs several times faster on AVX512-BF16); the fp32 engine's stays against sgemm's.
TEST_F(MismatchReportTest, ABf16TrainersMfuIsAgainstTheBf16ProductsPeak) {
  const fs::path run = dir_ / "bf16";
  const Json ledger = load_json_file((run / "ledger.json").string());
  EXPECT_TRUE(ledger["bf16_products"]["trainer"].get<bool>()) << ledger.dump();
  EXPECT_FALSE(ledger["bf16_products"]["rollout"].get<bool>()) << ledger.dump();
  const double bf16_peak = ledger["machine"]["bf16_matmul_peak_flops"].get<double>();
  EXPECT_GT(bf16_peak, 0.0);
  EXPECT_GE(bf16_peak, ledger["machine"]["bf16_matmul_peak_flops_start"].get<double>());  // the larger of the two
  const RunRecords records = read_run_records(run.string());
  const std::vector<LedgerLine> lines = build_ledger(
      run_model_config(records), run_ledger_figures(records, MachineFigures{}), run_ledger_dtypes(records));
  const LedgerLine& train = ledger_line(lines, "train_mfu");
  EXPECT_EQ(train.measured, bf16_peak);
  EXPECT_NE(train.measurement.find("bf16"), std::string::npos) << train.measurement;
  EXPECT_NEAR(train.ratio, train.formula_value / bf16_peak, 1e-12 * train.ratio);
  EXPECT_EQ(ledger_line(lines, "rollout_mfu").measured, ledger["machine"]["matmul_peak_flops"].get<double>());
}

TEST_F(MismatchReportTest, TheSectionShowsSizeBucketsAndWhereItEnters) {
  const fs::path run = dir_ / "bf16";
  CliResult r = run_cli("report " + run.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string md = read_text(run / "report.md");
  for (const char* part :
       {"## Mismatch: its size, where in the distribution, where it enters", "### By rollout probability",
        "### Where it enters", "rollout fp32 / trainer bf16", "(plots/mismatch_steps.png)",
        "(plots/mismatch_buckets.png)", "(plots/mismatch_stages.png)"})
    EXPECT_NE(md.find(part), std::string::npos) << part << "\n" << md;
  // The sync check is labelled as such, and reads 0: the engine computes what the trainer's weights give in its
  // own numerics.
  EXPECT_NE(md.find("sync check: probe max"), std::string::npos) << md;
  EXPECT_NE(md.find("first differ by more than 0.001 (`probe.layer_threshold`) at `"), std::string::npos) << md;

  const Json data = load_json_file((run / "plots" / "plot_data.json").string());
  const Json& s = data["runs"][0]["mismatch_section"];
  ASSERT_TRUE(s["present"].get<bool>()) << s.dump();
  ASSERT_EQ(s["k3_kl"].size(), 2u);
  ASSERT_EQ(s["full_tv"].size(), 2u);
  for (size_t step = 0; step < 2; ++step) {
    EXPECT_GT(s["k3_kl"][step].get<double>(), 0.0) << s.dump();
    EXPECT_GT(s["full_tv"][step].get<double>(), 0.0) << s.dump();
    EXPECT_GT(s["probe_full_tv"][step].get<double>(), 0.0) << s.dump();
  }
  EXPECT_EQ(s["buckets"]["labels"], Json::parse(R"(["p0.0-0.1", "p0.1-0.5", "p0.5-0.9", "p0.9-1.0"])"));
  double token_share = 0;
  for (const Json& v : s["buckets"]["token_share"]) token_share += v.get<double>();
  EXPECT_NEAR(token_share, 1.0, 1e-9);
  EXPECT_EQ(s["stages"]["names"],
            Json::parse(R"(["embed", "layer_0", "layer_1", "layer_2", "layer_3", "final_norm", "logits"])"));
  for (const Json& v : s["stages"]["max_abs"]) EXPECT_GT(v.get<double>(), 0.0) << s.dump();  // bf16 rounds all
  ASSERT_TRUE(s["stages"]["first_stage"].is_string()) << s.dump();
  EXPECT_EQ(s["stages"]["threshold"].get<double>(), 1e-3);

  std::vector<std::string> files;
  for (const std::string& name : report_mismatch_plot_names())
    files.push_back((run / "plots" / (name + ".png")).string());
  for (const Json& c : check_pngs(files)) {
    EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    EXPECT_GT(c["distinct_colors"].get<int64_t>(), 16) << c.dump();
    EXPECT_GT(c["non_background_fraction"].get<double>(), 0.02) << c.dump();
  }
}

// A fresh directory for a test that needs no run.
fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("rlcpp_report_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(ReportErrors, DirectoryWithoutMetricsIsNamed) {
  const fs::path empty = scratch_dir("empty");
  CliResult r = run_cli("report " + empty.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find((empty / "metrics.jsonl").string() + " not found"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(empty / "report.md"));
  fs::remove_all(empty);
}

TEST(ReportErrors, MalformedMetricsLineIsNamed) {
  const fs::path broken = scratch_dir("broken");
  auto write_metrics = [&](const std::string& second_line) {
    std::ofstream(broken / "metrics.jsonl", std::ios::trunc)
        << "{\"step\": 1, \"reward/mean\": 0.1}\n" << second_line << "\n{\"step\": 3, \"reward/mean\": 0.3}\n";
  };
  write_metrics("{\"step\": 2, \"reward/me");  // cut short, as by a crash mid-write
  CliResult r = run_cli("report " + broken.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find((broken / "metrics.jsonl").string() + ":2: not valid JSON"), std::string::npos)
      << r.output;

  write_metrics("{\"reward/mean\": 0.5}");  // an object, but no step
  r = run_cli("report " + broken.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("metrics.jsonl:2: the record has no numeric \"step\""), std::string::npos) << r.output;

  write_metrics("[2, 0.5]");  // JSON, but not an object
  r = run_cli("report " + broken.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("metrics.jsonl:2: expected a JSON object, got array"), std::string::npos) << r.output;
  fs::remove_all(broken);
}

TEST(ReportErrors, ImpossibleRecordsAreRefusedByReportAndScaleNamingFileAndLine) {
  const fs::path run = scratch_dir("impossible");
  const std::string metrics = (run / "metrics.jsonl").string();
  struct Case {
    std::string second_line, message;
  };
  const std::vector<Case> cases = {
      {R"({"step": 1, "timing_s/step": 1})", ":2: step 1 is recorded again (first at " + metrics + ":1)"},
      {R"({"step": 3.5})", ":2: \"step\" is 3.5; a step is an integer in [0, 1000000000000]"},
      {R"({"step": -3})", ":2: \"step\" is -3; a step is an integer"},
      {R"({"step": 9223372036854775807})", ":2: \"step\" is 9223372036854775807; a step is an integer"},
      {R"({"step": 2, "timing_s/step": -1e30})", ":2: \"timing_s/step\" is -1e+30; a time is a finite number"},
      {R"({"step": 2, "timing_s/rollout": -0.5, "timing_s/step": 1})", ":2: \"timing_s/rollout\" is -0.5"},
      {R"({"step": 2, "timing_s/step": 0})", ":2: \"timing_s/step\" is 0; a step takes time"},
      {R"({"step": 2, "timing_s/step": 1, "tokens": 64, "timing_s/update_actor": 0})",
       ":2: \"timing_s/update_actor\" is 0 beside 64 \"tokens\""},
  };
  for (const Case& c : cases) {
    std::ofstream(metrics, std::ios::trunc) << R"({"step": 1, "timing_s/step": 1})" << "\n" << c.second_line << "\n";
    for (const char* command : {"report ", "scale "}) {
      const CliResult r = run_cli(command + run.string());
      EXPECT_NE(r.status, 0) << command << c.second_line;
      EXPECT_NE(r.output.find(metrics + c.message), std::string::npos) << command << c.second_line << ":\n"
                                                                        << r.output;
    }
  }
  EXPECT_FALSE(fs::exists(run / "report.md"));
  fs::remove_all(run);
}

TEST(PngCheck, BlankImageIsCaught) {
  // A valid 64x48 RGBA PNG of one colour, written with the standard library: png_check must decode it and
  // call it blank, or the not-blank test above proves nothing.
  const fs::path path = fs::temp_directory_path() / ("rlcpp_blank_" + std::to_string(::getpid()) + ".png");
  const std::string script =
      "import struct, zlib, sys\n"
      "w, h = 64, 48\n"
      "raw = b''.join(b'\\x00' + b'\\xff\\xff\\xff\\xff' * w for _ in range(h))\n"
      "def chunk(k, d): return struct.pack('>I', len(d)) + k + d + struct.pack('>I', zlib.crc32(k + d))\n"
      "png = b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 6, 0, 0, 0))\n"
      "png += chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')\n"
      "open(sys.argv[1], 'wb').write(png)\n";
  const fs::path py = path.string() + ".py";
  std::ofstream(py) << script;
  ASSERT_EQ(std::system(("/usr/bin/python3 " + py.string() + " " + path.string()).c_str()), 0);
  const std::vector<Json> results = check_pngs({path.string()});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0]["ok"].get<bool>()) << results[0].dump();
  EXPECT_EQ(results[0]["distinct_colors"].get<int64_t>(), 1);
  EXPECT_EQ(results[0]["non_background_fraction"].get<double>(), 0.0);

  // A flipped byte in the pixel data breaks the CRC.
  std::string bytes = read_text(path);
  bytes[bytes.size() - 20] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const std::vector<Json> corrupt = check_pngs({path.string()});
  EXPECT_FALSE(corrupt[0]["ok"].get<bool>()) << corrupt[0].dump();
  fs::remove(path);
  fs::remove(py);
}

}  // namespace
}  // namespace rlcpp
