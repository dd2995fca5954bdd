#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "apps/commands.h"
#include "core/error.h"
#include "core/json_input.h"
#include "kernels/temperature.h"
#include "loop/evaluation.h"
#include "model/checkpoint.h"

namespace rlcpp::cli {

namespace {

// A line is {"text": "12+3=15"} (BOS added, EOS added when "eos": true) or {"tokens": [1, 4, ...]} as is.
std::vector<int32_t> parse_score_line(const std::string& line, const std::string& where, const CharTokenizer& tok,
                                      int64_t vocab) {
  Json j;
  try {
    j = parse_json_limited(line);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range (a number like 1e400)
    RLCPP_FAIL(where << ": invalid JSON: " << e.what());
  }
  RLCPP_CHECK(j.is_object(), where << ": expected an object with \"text\" or \"tokens\"");
  for (const auto& [key, value] : j.items())
    RLCPP_CHECK(key == "text" || key == "tokens" || key == "eos",
                where << ": unknown key \"" << key << "\" (valid keys: text, eos, tokens)");
  RLCPP_CHECK(!(j.contains("text") && j.contains("tokens")), where << ": gives both \"text\" and \"tokens\"; give one");
  RLCPP_CHECK(!j.contains("eos") || j["eos"].is_boolean(),
              where << ": \"eos\" must be true or false, got " << j["eos"].dump());
  RLCPP_CHECK(!j.contains("eos") || j.contains("text"), where << ": \"eos\" goes with \"text\" (token ids are scored as given)");
  std::vector<int32_t> ids;
  if (j.contains("text")) {
    RLCPP_CHECK(j["text"].is_string(), where << ": \"text\" must be a string");
    try {
      ids = encode_prompt(tok, j["text"].get<std::string>());
    } catch (const Error& e) {
      RLCPP_FAIL(where << ": " << e.what());
    }
    if (j.value("eos", false)) ids.push_back(tok.eos_id());
  } else if (j.contains("tokens")) {
    RLCPP_CHECK(j["tokens"].is_array(), where << ": \"tokens\" must be an array of integers");
    for (const auto& t : j["tokens"]) {
      RLCPP_CHECK(t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab,
                  where << ": token " << t.dump() << " is not an integer id in [0, " << vocab << ")");
      ids.push_back(t.get<int32_t>());
    }
  } else {
    RLCPP_FAIL(where << ": expected \"text\" or \"tokens\"");
  }
  RLCPP_CHECK(ids.size() >= 2, where << ": needs at least two tokens to score one");
  return ids;
}

}  // namespace

Command add_score_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("score", "per-token log-probs of given sequences (JSONL in, JSONL out)");
  struct Args {
    std::string checkpoint, input, output;
    float temperature = 1.0f;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory")->required();
  cmd->add_option("--input", a->input, "JSONL: {\"text\": ..., \"eos\": bool} or {\"tokens\": [...]} per line")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", a->output, "output JSONL (default: stdout)");
  cmd->add_option("--temperature", a->temperature,
                  "score under softmax(logits / temperature); finite and >= 1e-3 (colder overflows fp32)");
  return {cmd, [=]() {
    check_temperature(a->temperature, "score --temperature", /*zero_is_greedy=*/false);
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    Transformer model(params.config());
    CharTokenizer tok;
    std::ifstream in(a->input);
    std::vector<std::vector<int32_t>> seqs;
    std::vector<std::string> where;  // FILE:LINE of each sequence
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      where.push_back(a->input + ":" + std::to_string(n));
      seqs.push_back(parse_score_line(line, where.back(), tok, params.config().vocab_size));
    }
    PackedBatch batch = PackedBatch::from_sequences(seqs);
    Activations acts;
    ForwardOptions fwd;
    fwd.temperature = a->temperature;
    model.forward(params, batch, fwd, acts);
    // Before any output: a NaN would print as null (JSON) or -nan and pass for a score.
    const float* logp = acts.logp.data<float>();
    for (size_t s = 0; s < seqs.size(); ++s)
      for (int32_t t = batch.cu_seqlens[s]; t + 1 < batch.cu_seqlens[s + 1]; ++t)
        RLCPP_CHECK(std::isfinite(logp[t]), where[s] << ": the log-prob of token " << t - batch.cu_seqlens[s] + 1
                                                     << " is " << logp[t]
                                                     << " (the checkpoint's logits overflow or are not finite)");
    std::ofstream file;
    if (!a->output.empty()) {
      file.open(a->output);
      RLCPP_CHECK(file.good(), "cannot write '" << a->output << "'");
    }
    std::ostream& out = a->output.empty() ? std::cout : file;
    for (size_t s = 0; s < seqs.size(); ++s) {
      // logprobs[t] = log p(token t+1 | tokens 0..t)
      std::vector<float> lp(acts.logp.data<float>() + batch.cu_seqlens[s],
                            acts.logp.data<float>() + batch.cu_seqlens[s + 1] - 1);
      double sum = 0;
      for (float x : lp) sum += x;
      out << Json{{"tokens", seqs[s]}, {"logprobs", lp}, {"sum_logprob", sum}}.dump() << "\n";
    }
    return 0;
  }};
}

}  // namespace rlcpp::cli
