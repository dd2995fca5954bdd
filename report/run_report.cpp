#include "report/run_report.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <sys/wait.h>

#include "core/error.h"
#include "core/output_file.h"
#include "report/mismatch_section.h"
#include "report/shell_command.h"
#include "report/report_markdown.h"
#include "report/run_ledger.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

Json number_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

// The figure `key` of every step (null where a step lacks it).
Json column(const std::vector<Json>& records, const std::string& key) {
  Json out = Json::array();
  for (const Json& r : records) out.push_back(number_or_null(record_number(r, key)));
  return out;
}

// numerator / denominator per step, null where either is missing or the denominator is 0.
Json rate_column(const std::vector<Json>& records, const std::string& numerator, const std::string& denominator) {
  Json out = Json::array();
  for (const Json& r : records) {
    const double num = record_number(r, numerator), den = record_number(r, denominator);
    out.push_back(std::isfinite(num) && std::isfinite(den) && den > 0 ? Json(num / den) : Json(nullptr));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& report_plot_names() {
  static const std::vector<std::string> kNames = {"reward",   "accuracy",        "phase_shares", "throughput",
                                                  "mismatch", "response_length", "memory",       "agent"};
  return kNames;
}

const std::vector<PhaseGroup>& report_phase_groups() {
  static const std::vector<PhaseGroup> kGroups = {
      {"rollout", {"rollout"}},
      {"env", {"env"}},
      {"reward", {"reward"}},
      {"logprobs", {"old_logprob", "mismatch", "ref_logprob", "values"}},
      {"update", {"advantage", "update_actor", "update_critic"}},
      {"sync", {"weight_sync", "probe"}},
      {"eval + checkpoint", {"eval", "checkpoint"}},
      {"other", {"other"}}};
  return kGroups;
}

Json report_series(const RunRecords& run, const ModelConfig& model, double training_memory_formula_bytes) {
  const std::vector<Json>& m = run.metrics;
  Json s;
  s["label"] = run.label;
  s["step"] = column(m, "step");
  s["elapsed_s"] = column(m, "elapsed_s");
  s["reward_mean"] = column(m, "reward/mean");
  // An agent run's episodes (null elsewhere): turns and tool calls per episode, the share of calls that worked.
  s["agent"] = {{"turns_mean", column(m, "agent/turns_mean")},
                {"tool_calls", column(m, "agent/tool_calls")},
                {"tool_success", column(m, "agent/tool_success")}};

  Json eval = {{"step", Json::array()}, {"elapsed_s", Json::array()}, {"accuracy", Json::array()}};
  // A warm-started run starts from its SFT's final accuracy: step 0, before the first RL step.
  const std::string warm_start = run.dir + "/sft/metrics.jsonl";
  if (std::filesystem::exists(warm_start)) {
    const std::vector<Json> sft = read_metrics_records(warm_start);
    const double acc = sft.empty() ? NAN : record_number(sft.back(), "eval/accuracy");
    if (std::isfinite(acc)) {
      eval["step"].push_back(0);
      eval["elapsed_s"].push_back(0);
      eval["accuracy"].push_back(acc);
    }
  }
  for (const Json& r : m) {
    const double acc = record_number(r, "eval/accuracy");
    if (!std::isfinite(acc)) continue;
    eval["step"].push_back(record_number(r, "step"));
    eval["elapsed_s"].push_back(number_or_null(record_number(r, "elapsed_s")));
    eval["accuracy"].push_back(acc);
  }
  s["eval"] = eval;

  Json names = Json::array(), shares = Json::array();
  for (const PhaseGroup& g : report_phase_groups()) {
    names.push_back(g.name);
    Json row = Json::array();
    for (const Json& r : m) {
      double share = 0;
      bool any = false;
      for (const std::string& p : g.phases) {
        const double v = record_number(r, "timing_share/" + p);
        if (std::isfinite(v)) share += v, any = true;
      }
      row.push_back(any ? Json(share) : Json(nullptr));
    }
    shares.push_back(row);
  }
  s["phases"] = {{"names", names}, {"shares", shares}};

  s["rollout_tokens_per_s"] = rate_column(m, "tokens/sampled", "timing_s/rollout_draws");
  s["train_tokens_per_s"] = rate_column(m, "tokens/trained", "timing_s/update_actor");

  Json mismatch;
  for (const char* metric : {"max_abs_dlogp", "mean_abs_dp", "k3"})
    mismatch[metric] = {{"rollout", column(m, std::string("mismatch/") + metric)},
                        {"probe", column(m, std::string("probe/") + metric)}};
  s["mismatch"] = mismatch;

  Json lengths;
  for (const char* stat : {"mean", "min", "max", "p50", "p90"})
    lengths[stat] = column(m, std::string("rollout/response_length/") + stat);
  s["response_length"] = lengths;
  Json sampled = {{"step", Json::array()}, {"tokens", Json::array()}};
  for (const Json& sample : run.samples) {
    const double step = record_number(sample, "step");
    double tokens = record_number(sample, "response_tokens");
    // Runs from before response_tokens: the character tokenizer's text length (the EOS not counted).
    if (!std::isfinite(tokens) && sample.contains("response") && sample["response"].is_string())
      tokens = static_cast<double>(sample["response"].get<std::string>().size());
    if (!std::isfinite(step) || !std::isfinite(tokens)) continue;
    sampled["step"].push_back(step);
    sampled["tokens"].push_back(tokens);
  }
  s["sampled_lengths"] = sampled;

  s["rss_bytes"] = column(m, "memory/rss_bytes");
  s["peak_rss_bytes"] = column(m, "memory/peak_rss_bytes");
  s["training_memory_formula_bytes"] = number_or_null(training_memory_formula_bytes);
  s["mismatch_section"] = mismatch_section_series(run, model.num_hidden_layers);
  return s;
}

ReportFiles write_run_report(const ReportOptions& options) {
  RLCPP_CHECK(!options.run_dirs.empty(), "report: give at least one run directory");
  RLCPP_CHECK(options.run_dirs.size() == 1 || !options.out_dir.empty(),
              "report: " << options.run_dirs.size() << " runs overlaid need --out DIR for the report");
  const std::string out = options.out_dir.empty() ? options.run_dirs.front() : options.out_dir;

  const std::vector<std::string> labels = run_labels(options.run_dirs);
  std::vector<ReportRun> runs;
  MachineFigures here;  // measured only when some run has no ledger.json figures
  bool measured_here = false;
  for (size_t i = 0; i < options.run_dirs.size(); ++i) {
    ReportRun r;
    r.records = read_run_records(options.run_dirs[i]);
    r.records.label = labels[i];
    r.model = run_model_config(r.records);
    const MachineFigures own = run_machine_figures(r.records);
    if (!measured_here && (!std::isfinite(own.matmul_peak_flops) || !std::isfinite(own.copy_bandwidth))) {
      if (options.measure_machine) here = options.measure_machine();
      measured_here = true;
    }
    r.machine_measured_at_report = !std::isfinite(own.matmul_peak_flops) || !std::isfinite(own.copy_bandwidth);
    r.figures = run_ledger_figures(r.records, here);
    r.ledger = build_ledger(r.model, r.figures, run_ledger_dtypes(r.records));
    runs.push_back(std::move(r));
  }

  const fs::path plots_dir = fs::path(out) / "plots";
  std::error_code ec;
  fs::create_directories(plots_dir, ec);
  RLCPP_CHECK(!ec, "report: cannot create " << plots_dir.string() << ": " << ec.message());

  Json data = {{"runs", Json::array()}};
  for (const ReportRun& r : runs)
    data["runs"].push_back(
        report_series(r.records, r.model, ledger_line(r.ledger, "training_memory").formula_value));
  const std::string data_path = (plots_dir / "plot_data.json").string();
  write_json_file_atomic(data_path, data);

  ReportFiles files;
  files.report = (fs::path(out) / "report.md").string();
  {
    OutputFile md(files.report, OutputFile::Mode::kReplace);
    md.write(report_markdown(runs));
    md.close();
  }

  RLCPP_CHECK(fs::exists(options.plot_script), "report: the plotting script " << options.plot_script
                                                   << " is missing (set RLCPP_SOURCE_DIR to the rlcpp source tree)");
  // Previous PNGs must not pass for this run's.
  for (const std::string& name : report_plot_names()) fs::remove(plots_dir / (name + ".png"), ec);
  for (const std::string& name : report_mismatch_plot_names()) fs::remove(plots_dir / (name + ".png"), ec);
  const std::string command = "MPLBACKEND=Agg " + shell_quote(options.python) + " " +
                              shell_quote(options.plot_script) + " " + shell_quote(data_path) + " " +
                              shell_quote(plots_dir.string());
  const auto [status, output] = run_command(command);
  RLCPP_CHECK(status == 0, "report: " << files.report << " is written, but the plots failed: `" << command
                                      << "` exited with status " << status << " (it needs python3-matplotlib, "
                                      << "which scripts/ensure_deps.sh installs):\n" << output);
  std::vector<std::string> drawn = report_plot_names();
  bool any_mismatch = false;
  for (const ReportRun& r : runs) any_mismatch = any_mismatch || run_has_mismatch(r.records);
  if (any_mismatch) drawn.insert(drawn.end(), report_mismatch_plot_names().begin(), report_mismatch_plot_names().end());
  for (const std::string& name : drawn) {
    const fs::path png = plots_dir / (name + ".png");
    RLCPP_CHECK(fs::exists(png), "report: " << options.plot_script << " did not write " << png.string()
                                            << "; it printed:\n" << output);
    files.plots.push_back(png.string());
  }
  return files;
}

}  // namespace rlcpp
