// DPO preference data from a JSONL file, one pair per line:
//   {"prompt": "123+456=", "chosen": "579", "rejected": "578"}
// Each field is a string (other keys are ignored; blank lines are skipped). A pair trains on the sequences
// BOS + prompt + chosen + EOS and BOS + prompt + rejected + EOS, scored from the last prompt token on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "trainer/dpo_step.h"

namespace rlcpp {

struct PreferenceRecord {
  std::string prompt, chosen, rejected;
  int64_t line = 0;  // 1-based line in the file
};

// Every error names PATH:LINE and, for a bad field, the field: invalid JSON, not an object, a missing or
// non-string field, chosen equal to rejected (a pair with no preference). A file without pairs is an error.
std::vector<PreferenceRecord> read_preference_jsonl(const std::string& path);

// Token ids of every record; `path` names the file in errors. A character the tokenizer cannot encode is an
// error naming PATH:LINE, the field, the character and its index; so is a sequence longer than max_positions.
std::vector<PreferencePair> encode_preferences(const std::vector<PreferenceRecord>& records,
                                               const Tokenizer& tokenizer, int64_t max_positions,
                                               const std::string& path);

}  // namespace rlcpp
