#include "mismatch/mismatch_report.h"

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/output_file.h"
#include "report/mismatch_section.h"
#include "report/run_ledger.h"
#include "report/shell_command.h"
#include "mismatch/mismatch_report_markdown.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

Json number_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

std::string bucket_key(const std::string& label, const std::string& figure) {
  return "rollout_corr/bucket/" + label + "/" + figure;
}


}  // namespace

const std::vector<MismatchColumn>& mismatch_table_columns() {
  static const std::vector<MismatchColumn> kColumns = {
      {"mismatch/max_abs_dlogp", "max \\|Δlogp\\|", 3},
      {"rollout_corr/kl", "kl", 3},
      {"rollout_corr/k3_kl", "k3_kl", 3},
      {"rollout_corr/full_tv", "full-vocab TV", 3},
      {"rollout_corr/chi2_token", "chi2_token", 3},
      {"rollout_corr/probs_diff_mean", "probs_diff_mean", 3},
      {"rollout_corr/is_ess", "is_ess", 6},
      {"rollout_corr/ratio_outside_frac", "ratio_outside_frac", 3},
      {"probe/max_abs_dlogp", "sync check: probe max \\|Δlogp\\|", 3},
      {"probe_trainer/max_abs_dlogp", "probe_trainer max \\|Δlogp\\|", 3},
      {"weight_sync/rel_rms_err", "weight_sync rel_rms_err", 3}};
  return kColumns;
}

const std::vector<MismatchColumn>& mismatch_correction_columns() {
  static const std::vector<MismatchColumn> kColumns = {
      {"actor/rollout_corr/is_weight_mean", "loss weight mean", 6},
      {"actor/rollout_corr/masked_frac", "masked tokens", 3},
      {"actor/rollout_corr/seq_masked_frac", "masked sequences", 3}};
  return kColumns;
}

const std::vector<std::string>& mismatch_bucket_labels() {
  static const std::vector<std::string> kLabels = {"p0.0-0.1", "p0.1-0.5", "p0.5-0.9", "p0.9-1.0"};
  return kLabels;
}

const std::vector<std::string>& mismatch_bucket_figures() {
  static const std::vector<std::string> kFigures = {"kl", "k3_kl", "probs_diff_mean", "tokens"};
  return kFigures;
}

const std::vector<std::string>& mismatch_plot_names() {
  static const std::vector<std::string> kNames = {"bucket_mismatch", "k3_kl", "mismatch_steps", "mismatch_stages",
                                                  "accuracy"};
  return kNames;
}

MismatchPointFigures mismatch_point_figures(const RunRecords& run, int64_t layers) {
  MismatchPointFigures f;
  f.run_dir = run.dir;
  const std::vector<Json>& m = run.metrics;
  f.steps_recorded = static_cast<int64_t>(m.size());
  auto keep_mean = [&](const std::string& key) {
    const double v = mean_over_steps(m, key);
    if (std::isfinite(v)) f.mean[key] = v;
  };
  for (const MismatchColumn& c : mismatch_table_columns()) keep_mean(c.key);
  for (const MismatchColumn& c : mismatch_correction_columns()) keep_mean(c.key);
  for (const std::string& label : mismatch_bucket_labels())
    for (const std::string& figure : mismatch_bucket_figures()) keep_mean(bucket_key(label, figure));
  for (const Json& r : m) {
    const double acc = record_number(r, "eval/accuracy");
    if (!std::isfinite(acc)) continue;
    f.final_accuracy = acc;
    if (!(acc <= f.best_accuracy)) f.best_accuracy = acc;  // NaN at first
  }
  f.step_seconds = mean_over_steps(m, "timing_s/step");
  const double step_total = sum_over_steps(m, "timing_s/step");
  if (step_total > 0) f.old_logprob_share = sum_over_steps(m, "timing_s/old_logprob") / step_total;
  if (layers >= 0 && run_has_mismatch(run)) {
    const Json stages = mismatch_section_series(run, layers)["stages"];
    if (!stages["first_stage"].is_null()) f.first_stage = stages["first_stage"].get<std::string>();
    f.first_stage_steps = stages["first_stage_steps"].get<int64_t>();
    for (size_t i = 0; i < stages["names"].size(); ++i)
      if (!stages["max_abs"][i].is_null())
        f.stage_max_abs.emplace_back(stages["names"][i].get<std::string>(), stages["max_abs"][i].get<double>());
  }
  return f;
}

Json mismatch_plot_data(const SweepResult& sweep, const std::vector<MismatchPointFigures>& figures,
                        const std::vector<RunRecords>& runs) {
  Json data = {{"sweep_file", sweep.sweep_file},
               {"baseline", sweep.baseline},
               {"start_accuracy", sweep.warm_start_accuracy >= 0 ? Json(sweep.warm_start_accuracy) : Json(nullptr)},
               {"buckets", mismatch_bucket_labels()},
               {"bucket_figures", mismatch_bucket_figures()},
               {"points", Json::array()}};
  for (size_t i = 0; i < figures.size(); ++i) {
    const MismatchPointFigures& f = figures[i];
    const RunRecords& run = runs[i];
    Json summary;
    for (const MismatchColumn& c : mismatch_table_columns()) {
      const auto it = f.mean.find(c.key);
      summary[c.key] = it == f.mean.end() ? Json(nullptr) : Json(it->second);
    }
    summary["eval/final_accuracy"] = number_or_null(f.final_accuracy);
    summary["eval/best_accuracy"] = number_or_null(f.best_accuracy);
    summary["timing_s/step_mean"] = number_or_null(f.step_seconds);
    summary["timing_share/old_logprob_run"] = number_or_null(f.old_logprob_share);
    Json bucket;
    for (const std::string& figure : mismatch_bucket_figures()) {
      Json row = Json::array();
      for (const std::string& label : mismatch_bucket_labels()) {
        const auto it = f.mean.find(bucket_key(label, figure));
        row.push_back(it == f.mean.end() ? Json(nullptr) : Json(it->second));
      }
      bucket[figure] = row;
    }
    Json step = Json::array(), k3 = Json::array(), dlogp = Json::array();
    Json eval = {{"step", Json::array()}, {"accuracy", Json::array()}};
    for (const Json& r : run.metrics) {
      step.push_back(record_number(r, "step"));
      k3.push_back(number_or_null(record_number(r, "rollout_corr/k3_kl")));
      dlogp.push_back(number_or_null(record_number(r, "mismatch/max_abs_dlogp")));
      const double acc = record_number(r, "eval/accuracy");
      if (std::isfinite(acc)) eval["step"].push_back(record_number(r, "step")), eval["accuracy"].push_back(acc);
    }
    // The report's mismatch section of the point's run (report/mismatch_section.h): k3 and TV over steps, where
    // it enters. The drawing is plot_report.py's, so both reports show them alike.
    Json section = {{"present", false}};
    if (!run.metrics.empty() && run.ledger.is_object())  // a point that failed early may have neither
      section = mismatch_section_series(run, run_model_config(run).num_hidden_layers);
    data["points"].push_back({{"name", f.name},
                              {"label", f.name},
                              {"source", f.source},
                              {"failed", !f.error.empty()},
                              {"summary", summary},
                              {"bucket", bucket},
                              {"step", step},
                              {"k3_kl", k3},
                              {"max_abs_dlogp", dlogp},
                              {"eval", eval},
                              {"mismatch_section", section}});
  }
  return data;
}

MismatchReportFiles write_mismatch_report(const SweepResult& sweep, const MismatchReportOptions& options) {
  std::vector<MismatchPointFigures> figures;
  std::vector<RunRecords> runs;
  for (const SweepPointResult& p : sweep.points) {
    RunRecords run;
    MismatchPointFigures f;
    if (!p.run_dir.empty()) {
      try {
        run = read_run_records(p.run_dir);
        f = mismatch_point_figures(run, run.ledger.is_object() ? run_model_config(run).num_hidden_layers : -1);
      } catch (const Error& e) {
        RLCPP_CHECK(!p.error.empty(), "mismatch: point " << p.name << " finished but its run cannot be read: "
                                                         << e.what());
      }
    }
    f.name = p.name;
    f.source = p.source;
    f.set = p.set;
    f.run_dir = p.run_dir;
    f.error = p.error;
    f.steps_configured = p.steps;
    f.seconds = p.seconds;
    figures.push_back(std::move(f));
    runs.push_back(std::move(run));
  }

  const fs::path out(sweep.out_dir);
  const fs::path plots_dir = out / "plots";
  std::error_code ec;
  fs::create_directories(plots_dir, ec);
  RLCPP_CHECK(!ec, "mismatch: cannot create " << plots_dir.string() << ": " << ec.message());

  MismatchReportFiles files;
  files.plot_data = (plots_dir / "plot_data.json").string();
  write_json_file_atomic(files.plot_data, mismatch_plot_data(sweep, figures, runs));
  files.report = (out / "report.md").string();
  {
    OutputFile md(files.report, OutputFile::Mode::kReplace);
    md.write(mismatch_report_markdown(sweep, figures));
    md.close();
  }

  RLCPP_CHECK(fs::exists(options.plot_script), "mismatch: the plotting script " << options.plot_script
                                                   << " is missing (set RLCPP_SOURCE_DIR to the rlcpp source tree)");
  for (const std::string& name : mismatch_plot_names()) fs::remove(plots_dir / (name + ".png"), ec);
  const std::string command = "MPLBACKEND=Agg " + shell_quote(options.python) + " " +
                              shell_quote(options.plot_script) + " " + shell_quote(files.plot_data) + " " +
                              shell_quote(plots_dir.string());
  const auto [status, output] = run_command(command);
  RLCPP_CHECK(status == 0, "mismatch: " << files.report << " is written, but the plots failed: `" << command
                                        << "` exited with status " << status << " (it needs python3-matplotlib, "
                                        << "which scripts/ensure_deps.sh installs):\n" << output);
  for (const std::string& name : mismatch_plot_names()) {
    const fs::path png = plots_dir / (name + ".png");
    RLCPP_CHECK(fs::exists(png), "mismatch: " << options.plot_script << " did not write " << png.string()
                                              << "; it printed:\n" << output);
    files.plots.push_back(png.string());
  }
  return files;
}

}  // namespace rlcpp
