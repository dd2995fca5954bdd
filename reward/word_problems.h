// Templated GSM8K-style word problems: 2 to 4 arithmetic steps (shopping and change, sharing, rates, ages,
// money left, savings, packing boxes, pages left), names and objects varied, every intermediate value and the
// answer a non-negative integer. A problem is a pure function of the Philox draws, in the order the code
// makes them; scripts/make_word_problems.py makes the same draws and must be changed with this file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/philox.h"

namespace rlcpp {

struct WordProblem {
  std::string template_name;     // "shopping", "sharing", ... (word_problem_templates())
  std::vector<int64_t> numbers;  // the numbers drawn for it (the split key); names and objects are not in it
  std::string question;          // the problem text
  std::string solution;          // a short worked solution whose last line is "#### <answer>"
  int64_t answer = 0;
  int64_t steps = 0;  // arithmetic steps of the solution
};

// The template names in the order a draw indexes them.
const std::vector<std::string>& word_problem_templates();

// One problem: the template index first (uniform), then that template's names, objects and numbers.
WordProblem draw_word_problem(PhiloxStream& rng);

// The split key: fnv1a64("<template>:<n1>,<n2>,...") — the same numbers under the same template with other
// names or objects are one problem for the split.
uint64_t word_problem_key(const std::string& template_name, const std::vector<int64_t>& numbers);

}  // namespace rlcpp
