// `rlcpp mismatch`: the tiny sweep (configs/mismatch_tiny.json: an fp32 and a bf16-rollout point from one shared
// SFT warm start; shortened here to 2 GRPO steps after 30 SFT steps) run end to end through the CLI writes
// report.md with both points, the fp32 point's mismatch exactly 0 (the engine's log-probs equal the trainer's bit
// for bit) and the bf16 point's above 0, where it enters, and PNGs that decode (tests/png_check.py) and are not
// blank; a sweep file with an unknown key
// or a bad value is refused before anything runs, naming the file and the key path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app_test_support.h"
#include "core/config.h"
#include "mismatch/mismatch_report.h"
#include "mismatch/mismatch_sweep.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

bool python_has_matplotlib() {
  return std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
}

// The cells of the first table row of `text` whose first cell is `label` ("" cells kept); empty when none.
std::vector<std::string> table_row(const std::string& text, const std::string& label) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| " + label + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) {
      const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    return cells;
  }
  return {};
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

// A JSON number as a double; NaN for null or anything else, so a missing figure fails a comparison cleanly.
double number(const Json& j) { return j.is_number() ? j.get<double>() : std::nan(""); }

const Json& point_named(const Json& plot_data, const std::string& name) {
  for (const Json& p : plot_data["points"])
    if (p["name"] == name) return p;
  static const Json kNone;
  ADD_FAILURE() << "no point " << name << " in plot_data.json";
  return kNone;
}

class MismatchSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: a split run's worker sockets live in the run directory, and a Unix socket path is at most 107 bytes.
    dir_ = fs::temp_directory_path() / ("rlcpp_mm_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  // A sweep file on the shipped add3 config with one point whose set is `point_set`.
  std::string sweep_with_point_set(const std::string& point_set) {
    return write("sweep.json", std::string(R"({"base": ")") + RLCPP_SOURCE_DIR +
                                   R"(/configs/grpo_add3.json", "points": [{"name": "fp32", "set": {}}, )"
                                   R"({"name": "bad", "set": )" + point_set + "}]}");
  }
  // Runs `rlcpp mismatch FILE --out DIR/out`; it must fail before making the sweep's directory.
  std::string refused(const std::string& file) {
    const CliResult r = run_cli("mismatch " + file + " --out " + (dir_ / "out").string());
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "a refused sweep ran something\n" << r.output;
    EXPECT_NE(r.output.find(file), std::string::npos) << "the error names the file\n" << r.output;
    return r.output;
  }
  fs::path dir_;
};

TEST_F(MismatchSweepTest, TinySweepReportsExactZeroForFp32AndAMismatchForBf16) {
  if (!python_has_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 cannot import matplotlib (python3-matplotlib)";
  const fs::path out = dir_ / "sweep";
  // Shortened (the shipped warm start is the main job's 360 SFT steps, ~15 s): the figures' signs need no
  // learning.
  const CliResult r = run_cli("mismatch " RLCPP_SOURCE_DIR "/configs/mismatch_tiny.json --out " + out.string() +
                              " --set warm_start.sft.steps=30 --set warm_start.sft.batch_size=64"
                              " --set warm_start.sft.micro_batch_size=64 --set warm_start.sft.eval_size=50"
                              " --set steps=2 --set eval_every=1 --set eval_size=50"
                              " --set rollout.prompts_per_step=16 --set rollout.group_size=4"
                              " --set ppo.mini_batch_size=32 --set ppo.micro_batch_size=32 --set probe.prompts=4");
  ASSERT_EQ(r.status, 0) << r.output;
  // Progress: the shared warm start, a line per point with the ETA, each run's step lines.
  EXPECT_NE(r.output.find("mismatch: shared SFT warm start"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mismatch: point 1/2 fp32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mismatch: point 2/2 rollout_bf16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| ETA "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step    2/2"), std::string::npos) << r.output;

  // One starting policy: the warm start ran once, in OUT/sft, and both runs start from its checkpoint.
  const Json sweep = load_json_file((out / "sweep.json").string());
  const std::string start = sweep["start_checkpoint"].get<std::string>();
  EXPECT_EQ(start.rfind((out / "sft").string(), 0), 0u) << start;
  EXPECT_TRUE(fs::exists(fs::path(start) / "model.safetensors")) << start;
  for (const char* name : {"fp32", "rollout_bf16"}) {
    const Json cfg = load_json_file((out / name / "config.json").string());
    EXPECT_EQ(cfg["init_checkpoint"], start) << name;
    EXPECT_EQ(cfg["warm_start"]["enabled"], false) << name;
    EXPECT_EQ(cfg["steps"], 2) << name;
  }
  EXPECT_EQ(load_json_file((out / "rollout_bf16" / "config.json").string())["rollout"]["dtype"], "bf16");

  // Every fp32 step is bit-identical; every bf16 step is not.
  for (const Json& step : read_jsonl_objects((out / "fp32" / "metrics.jsonl").string(), "step")) {
    EXPECT_EQ(step["mismatch/max_abs_dlogp"].get<double>(), 0.0) << step.dump();
    EXPECT_EQ(step["rollout_corr/k3_kl"].get<double>(), 0.0) << step.dump();
  }
  for (const Json& step : read_jsonl_objects((out / "rollout_bf16" / "metrics.jsonl").string(), "step"))
    EXPECT_GT(step["mismatch/max_abs_dlogp"].get<double>(), 0.0) << step.dump();

  const Json data = load_json_file((out / "plots" / "plot_data.json").string());
  ASSERT_EQ(data["points"].size(), 2u);
  const Json& fp32 = point_named(data, "fp32")["summary"];
  const Json& bf16 = point_named(data, "rollout_bf16")["summary"];
  ASSERT_TRUE(fp32["mismatch/max_abs_dlogp"].is_number()) << fp32.dump();
  EXPECT_EQ(number(fp32["mismatch/max_abs_dlogp"]), 0.0);
  EXPECT_EQ(number(fp32["rollout_corr/kl"]), 0.0);
  EXPECT_EQ(number(fp32["rollout_corr/is_ess"]), 1.0);
  EXPECT_TRUE(fp32["weight_sync/rel_rms_err"].is_null()) << "fp32 weights are the master weights";
  ASSERT_TRUE(bf16["mismatch/max_abs_dlogp"].is_number()) << bf16.dump();
  EXPECT_GT(number(bf16["mismatch/max_abs_dlogp"]), 0.0);
  EXPECT_GT(number(bf16["rollout_corr/k3_kl"]), 0.0);
  EXPECT_GT(number(bf16["probe_trainer/max_abs_dlogp"]), 0.0);
  EXPECT_GT(number(bf16["weight_sync/rel_rms_err"]), 0.0);
  EXPECT_EQ(number(bf16["probe/max_abs_dlogp"]), 0.0) << "the engine equals the trainer's bf16 forward";
  EXPECT_TRUE(std::isfinite(number(bf16["eval/final_accuracy"])));
  EXPECT_EQ(point_named(data, "rollout_bf16")["eval"]["accuracy"].size(), 2u);  // eval_every 1, 2 steps
  // Where it enters and the full-vocabulary TV (report/mismatch_section.h): the bf16 point's, none for fp32.
  EXPECT_GT(number(bf16["rollout_corr/full_tv"]), 0.0);
  EXPECT_FALSE(point_named(data, "fp32")["mismatch_section"]["present"].get<bool>());
  const Json& section = point_named(data, "rollout_bf16")["mismatch_section"];
  ASSERT_TRUE(section["present"].get<bool>()) << section.dump();
  EXPECT_EQ(section["stages"]["names"].size(), 7u);  // embed, 4 layers, final_norm, logits
  EXPECT_TRUE(section["stages"]["first_stage"].is_string()) << section.dump();
  EXPECT_EQ(section["full_tv"].size(), 2u);

  // report.md: both points in the rollout-dtype table, the fp32 row first (the baseline) with its 0.
  const std::string md = read_text(out / "report.md");
  const size_t table = md.find("### rollout dtype");
  ASSERT_NE(table, std::string::npos) << md;
  const std::vector<std::string> base_row = table_row(md.substr(table), "fp32 (baseline)");
  const std::vector<std::string> bf16_row = table_row(md.substr(table), "rollout_bf16");
  ASSERT_GE(base_row.size(), 2u) << md;
  ASSERT_GE(bf16_row.size(), 2u) << md;
  EXPECT_EQ(base_row[1], "0") << md;  // max |Δlogp|
  EXPECT_NE(bf16_row[1], "") << md;
  EXPECT_NE(bf16_row[1], "0") << md;
  EXPECT_GT(std::stod(bf16_row[1]), 0.0) << md;
  EXPECT_LT(md.find("| fp32 (baseline) |"), md.find("| rollout_bf16 |")) << md;
  EXPECT_NE(md.find("sync check: probe max"), std::string::npos) << md;
  EXPECT_NE(md.find("- **rollout_bf16**: enters at `"), std::string::npos) << md;
  for (const std::string& name : mismatch_plot_names())
    EXPECT_NE(md.find("plots/" + name + ".png"), std::string::npos) << name;

  std::vector<std::string> pngs;
  for (const std::string& name : mismatch_plot_names()) pngs.push_back((out / "plots" / (name + ".png")).string());
  const std::vector<Json> checked = check_pngs(pngs);
  ASSERT_EQ(checked.size(), pngs.size());
  for (const Json& c : checked) {
    EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    if (!c["ok"].get<bool>()) continue;
    EXPECT_GE(c["width"].get<int64_t>(), 400) << c.dump();
    EXPECT_GE(c["height"].get<int64_t>(), 300) << c.dump();
    EXPECT_GT(c["distinct_colors"].get<int64_t>(), 16) << c.dump();
    EXPECT_GT(c["non_background_fraction"].get<double>(), 0.02) << c.dump();
  }
}

TEST_F(MismatchSweepTest, AnUnknownKeyInAPointIsRefusedNamingFileAndKey) {
  const std::string out = refused(sweep_with_point_set(R"({"rollout.dtyp": "bf16"})"));
  EXPECT_NE(out.find("points[1] (\"bad\").set: unknown config key 'rollout.dtyp'"), std::string::npos) << out;
}

TEST_F(MismatchSweepTest, AnUnknownSweepKeyIsRefusedNamingFileAndKey) {
  const std::string file = write("sweep.json", std::string(R"({"base": ")") + RLCPP_SOURCE_DIR +
                                                   R"(/configs/grpo_add3.json", "pionts": []})");
  const std::string out = refused(file);
  EXPECT_NE(out.find("unknown config key 'pionts'"), std::string::npos) << out;
  EXPECT_NE(out.find("valid keys here: base, set, points"), std::string::npos) << out;
}

TEST_F(MismatchSweepTest, ABadValueIsRefusedNamingTheKey) {
  const std::string out = refused(sweep_with_point_set(R"({"rollout.dtype": "bf17"})"));
  EXPECT_NE(out.find("rollout.dtype"), std::string::npos) << out;
  EXPECT_NE(out.find("bf17"), std::string::npos) << out;
}

TEST_F(MismatchSweepTest, APointCannotChangeTheSharedStart) {
  const std::string out = refused(sweep_with_point_set(R"({"warm_start.sft.steps": 10})"));
  EXPECT_NE(out.find("points[1] (\"bad\").set: config key 'warm_start.sft.steps'"), std::string::npos) << out;
}

TEST_F(MismatchSweepTest, DuplicatePointNamesAreRefused) {
  const std::string file = write("sweep.json", std::string(R"({"base": ")") + RLCPP_SOURCE_DIR +
                                                   R"(/configs/grpo_add3.json", "points": [{"name": "a"}, )"
                                                   R"({"name": "a", "set": {"rollout.dtype": "fp16"}}]})");
  const std::string out = refused(file);
  EXPECT_NE(out.find("config key 'points[1].name'"), std::string::npos) << out;
}

TEST_F(MismatchSweepTest, TheShippedSweepsLoad) {
  for (const char* file : {"mismatch_add3.json", "mismatch_tiny.json"}) {
    const MismatchSweep s = load_mismatch_sweep(std::string(RLCPP_SOURCE_DIR "/configs/") + file);
    EXPECT_TRUE(s.shared_warm_start) << file;
    ASSERT_FALSE(s.points.empty()) << file;
    EXPECT_EQ(s.baseline, "fp32") << file;
    for (const SweepPoint& p : s.points) {
      EXPECT_FALSE(p.config.warm_start.enabled) << file << " " << p.name;
      EXPECT_EQ(p.config.init_checkpoint, "") << file << " " << p.name;
    }
  }
  const MismatchSweep full = load_mismatch_sweep(RLCPP_SOURCE_DIR "/configs/mismatch_add3.json");
  std::vector<std::string> names;
  for (const SweepPoint& p : full.points) names.push_back(p.name);
  for (const char* want : {"fp32", "rollout_bf16", "rollout_fp16", "rollout_int8", "rollout_fp8_e4m3", "trainer_bf16",
                           "batch_invariant_false", "rollout_bf16_tis_token", "rollout_bf16_tis_sequence",
                           "rollout_bf16_mis_geometric", "rollout_bf16_icepop", "rollout_bf16_bypass"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

TEST_F(MismatchSweepTest, AnOutDirectoryTooLongForTheWorkersSocketsIsRefusedBeforeRunning) {
  const fs::path out = dir_ / std::string(90, 'x');
  const CliResult r = run_cli("mismatch " RLCPP_SOURCE_DIR "/configs/mismatch_tiny.json --out " + out.string());
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("point fp32's split workers would listen on ipc://"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give a shorter --out"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out)) << r.output;
}

TEST_F(MismatchSweepTest, ASecondSweepIntoTheSameDirectoryGoesBeside) {
  const fs::path out = dir_ / "sweep";
  EXPECT_EQ(fresh_sweep_dir(out.string()), out.string());
  fs::create_directories(out);
  std::ofstream(out / "sweep.json") << "{}";
  EXPECT_EQ(fresh_sweep_dir(out.string()), out.string() + "-2");
  fs::create_directories(out.string() + "-2");
  std::ofstream(out.string() + "-2/sweep.json") << "{}";
  EXPECT_EQ(fresh_sweep_dir(out.string()), out.string() + "-3");
}

}  // namespace
}  // namespace rlcpp
