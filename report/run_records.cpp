#include "report/run_records.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/json_input.h"

namespace rlcpp {

namespace fs = std::filesystem;

std::vector<Json> read_jsonl_objects(const std::string& path, const std::string& required_number) {
  std::ifstream in(path);
  RLCPP_CHECK(in.good(), path << ": cannot be read (missing or not a file)");
  std::vector<Json> out;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j;
    try {
      j = parse_json_limited(line);
    } catch (const Json::exception& e) {  // parse_error, or out_of_range (a number like 1e400)
      RLCPP_FAIL(path << ":" << line_no << ": not valid JSON (" << e.what() << ")");
    }
    RLCPP_CHECK(j.is_object(), path << ":" << line_no << ": expected a JSON object, got " << j.type_name());
    RLCPP_CHECK(required_number.empty() || (j.contains(required_number) && j[required_number].is_number()),
                path << ":" << line_no << ": the record has no numeric \"" << required_number << "\"");
    out.push_back(std::move(j));
  }
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
  run.metrics = read_jsonl_objects(metrics.string(), "step");
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
