// The text of `rlcpp mismatch`'s report.md (mismatch/mismatch_report.h): the points, one table of mismatch figures
// per source (the baseline's row first in each), the rollout-probability bucket tables, where each point's
// mismatch enters, and the plots.
#pragma once

#include <string>
#include <vector>

#include "mismatch/mismatch_report.h"
#include "mismatch/mismatch_sweep.h"

namespace rlcpp {

// A table cell: "" when absent (NaN), "0" when exactly 0, else `digits` significant digits.
std::string mismatch_cell(double v, int digits);

// Images are referenced as plots/<name>.png next to report.md.
std::string mismatch_report_markdown(const SweepResult& sweep, const std::vector<MismatchPointFigures>& points);

}  // namespace rlcpp
