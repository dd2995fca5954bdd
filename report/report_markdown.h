// report.md of `rlcpp report` (report/run_report.h): a summary table, the plots with how to read them, where a
// step's time goes, the mismatch section of runs that have one (report/mismatch_section.h), and each run's
// ledger (report/ledger.h).
#pragma once

#include <string>
#include <vector>

#include "report/ledger.h"
#include "report/run_records.h"
#include "model/model_config.h"

namespace rlcpp {

struct ReportRun {
  RunRecords records;
  ModelConfig model;
  LedgerFigures figures;
  std::vector<LedgerLine> ledger;
  bool machine_measured_at_report = false;  // the run had no ledger.json peaks; these are this machine's
};

// The Markdown text; images are referenced as plots/<name>.png next to report.md.
std::string report_markdown(const std::vector<ReportRun>& runs);

}  // namespace rlcpp
