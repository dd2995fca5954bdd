// A `rlcpp train` run directory read back for reports (report/run_report.h): config.json, metrics.jsonl (one
// object per step), samples.jsonl and the ledger.json written when the run started (report/run_ledger.h).
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp {

struct RunRecords {
  std::string dir;
  std::string label;          // how plots and tables name the run: its directory's name
  Json config;                // config.json; null when absent
  std::vector<Json> metrics;  // metrics.jsonl in file order, each an object with a numeric "step"
  std::vector<Json> samples;  // samples.jsonl; empty when absent
  Json ledger;                // ledger.json; null when absent (a run from before the ledger existed)
};

// Every non-blank line of a JSONL file as a JSON object, each holding a number at `required_number` unless
// that is ""; a line that is not one is an error naming "PATH:LINE" and what is wrong with it. A missing file
// is an error naming it.
std::vector<Json> read_jsonl_objects(const std::string& path, const std::string& required_number = "");

// Reads `dir`; metrics.jsonl is required (the error names it and says what a run directory holds), every
// record must carry a numeric "step" (the error names "metrics.jsonl:LINE").
RunRecords read_run_records(const std::string& dir);

// Labels for several runs: each directory's name, or "parent/name" where two names collide.
std::vector<std::string> run_labels(const std::vector<std::string>& dirs);

// The number at `key` of a metrics record, or NaN when absent or not a number.
double record_number(const Json& record, const std::string& key);
// The sum of `key` over the records that have it as a number (0 when none does).
double sum_over_steps(const std::vector<Json>& records, const std::string& key);
// The mean of `key` over the records that have it as a number; NaN when none does.
double mean_over_steps(const std::vector<Json>& records, const std::string& key);

}  // namespace rlcpp
