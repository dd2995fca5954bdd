#include "report/run_records.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

// Calls on_record(object, "PATH:LINE") for every non-blank line of a JSONL file, each a JSON object.
void for_each_jsonl_object(const std::string& path, const InputKind& kind,
                           const std::function<void(Json, const std::string&)>& on_record) {
  const InputFile in(path, kind);
  in.for_each_line([&](std::string_view line, int64_t line_no) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
    const std::string where = path + ":" + std::to_string(line_no);
    Json j;
    try {
      j = parse_json_limited(line);
    } catch (const Json::exception& e) {  // parse_error, or out_of_range (a number like 1e400)
      RLCPP_FAIL(where << ": not valid JSON (" << e.what() << ")");
    }
    RLCPP_CHECK(j.is_object(), where << ": expected a JSON object, got " << j.type_name());
    on_record(std::move(j), where);
  });
}

// Far past any run (a trillion steps: at a millisecond each, thirty years), and exact as a double.
constexpr int64_t kMaxRecordedStep = 1'000'000'000'000;

// A key that holds a time in seconds (not a rate, "..._per_s").
bool is_time_key(const std::string& key) {
  return key.starts_with("timing_s/") || (key.ends_with("_s") && !key.ends_with("per_s"));
}

// "timing_s/other" is the step's time less its phases', which rounding may leave a hair below zero.
constexpr double kTimeRoundingS = 1e-6;

void check_metrics_record(const Json& r, const std::string& where) {
  const auto step = r.find("step");
  RLCPP_CHECK(step != r.end() && step->is_number(), where << ": the record has no numeric \"step\"");
  RLCPP_CHECK(step->is_number_integer() && step->get<int64_t>() >= 0 && step->get<int64_t>() <= kMaxRecordedStep,
              where << ": \"step\" is " << json_excerpt(*step) << "; a step is an integer in [0, " << kMaxRecordedStep
                    << "]");
  for (const auto& [key, value] : r.items()) {
    if (!is_time_key(key) || !value.is_number()) continue;
    const double seconds = value.get<double>();
    RLCPP_CHECK(std::isfinite(seconds) && seconds >= -kTimeRoundingS,
                where << ": \"" << key << "\" is " << json_excerpt(value)
                      << "; a time is a finite number of seconds >= 0");
  }
  for (const char* key : {"timing_s/step", "step_s"})
    RLCPP_CHECK(record_number(r, key) != 0, where << ": \"" << key << "\" is 0; a step takes time");
  // The rates reports divide by these times: a count of tokens done in no time is no measurement.
  const std::pair<const char*, const char*> rates[] = {{"rollout/generated_tokens", "timing_s/rollout"},
                                                       {"tokens", "timing_s/update_actor"}};
  for (const auto& [count, time] : rates)
    RLCPP_CHECK(!(record_number(r, count) > 0 && record_number(r, time) == 0),
                where << ": \"" << time << "\" is 0 beside " << record_number(r, count) << " \"" << count
                      << "\"; a rate of them would divide by zero");
}

}  // namespace

std::vector<Json> read_jsonl_objects(const std::string& path, const std::string& required_number) {
  std::vector<Json> out;
  for_each_jsonl_object(path, kRunRecordsInput, [&](Json j, const std::string& where) {
    RLCPP_CHECK(required_number.empty() || (j.contains(required_number) && j[required_number].is_number()),
                where << ": the record has no numeric \"" << required_number << "\"");
    out.push_back(std::move(j));
  });
  return out;
}

std::vector<Json> read_metrics_records(const std::string& path) {
  std::vector<Json> out;
  std::map<int64_t, std::string> where_of_step;
  for_each_jsonl_object(path, kRunRecordsInput.named("a metrics.jsonl"), [&](Json j, const std::string& where) {
    check_metrics_record(j, where);
    const auto [first, fresh] = where_of_step.emplace(j["step"].get<int64_t>(), where);
    RLCPP_CHECK(fresh, where << ": step " << first->first << " is recorded again (first at " << first->second
                             << "); a run writes one record per step");
    out.push_back(std::move(j));
  });
  return out;
}

RunRecords read_run_records(const std::string& dir) {
  RunRecords run;
  run.dir = dir;
  run.label = run_labels({dir}).front();
  const fs::path root(dir);
  RLCPP_CHECK(fs::is_directory(root), "report: '" << dir << "' is not a directory (expected a `rlcpp train` run "
                                                    "directory holding config.json and metrics.jsonl)");
  const fs::path metrics = root / "metrics.jsonl";
  RLCPP_CHECK(fs::exists(metrics), "report: " << metrics.string()
                                              << " not found (a `rlcpp train` run directory holds config.json, "
                                                 "metrics.jsonl, samples.jsonl)");
  run.metrics = read_metrics_records(metrics.string());
  RLCPP_CHECK(!run.metrics.empty(), "report: " << metrics.string() << " holds no step records");
  if (fs::exists(root / "config.json")) run.config = load_json_file((root / "config.json").string());
  if (fs::exists(root / "samples.jsonl")) run.samples = read_jsonl_objects((root / "samples.jsonl").string());
  if (fs::exists(root / "ledger.json")) run.ledger = load_json_file((root / "ledger.json").string());
  return run;
}

std::vector<std::string> run_labels(const std::vector<std::string>& dirs) {
  auto name_of = [](const std::string& dir) {
    fs::path p = fs::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // "runs/a/" -> "runs/a"
    return p;
  };
  std::map<std::string, int> seen;
  for (const std::string& d : dirs) ++seen[name_of(d).filename().string()];
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    const fs::path p = name_of(d);
    const std::string name = p.filename().string();
    out.push_back(seen[name] > 1 && !p.parent_path().filename().empty()
                      ? (p.parent_path().filename() / p.filename()).string()
                      : name);
  }
  return out;
}

double record_number(const Json& record, const std::string& key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

double sum_over_steps(const std::vector<Json>& records, const std::string& key) {
  double sum = 0;
  for (const Json& r : records) {
    const double v = record_number(r, key);
    if (std::isfinite(v)) sum += v;
  }
  return sum;
}

double mean_over_steps(const std::vector<Json>& records, const std::string& key) {
  double sum = 0;
  size_t n = 0;
  for (const Json& r : records) {
    const double v = record_number(r, key);
    if (std::isfinite(v)) sum += v, ++n;
  }
  return n ? sum / static_cast<double>(n) : std::nan("");
}

}  // namespace rlcpp
