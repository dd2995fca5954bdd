#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "apps/output_path.h"
#include "apps/commands.h"
#include "apps/float_option.h"
#include "apps/tokenizer_options.h"
#include "core/error.h"
#include "kernels/temperature.h"
#include "loop/evaluation.h"
#include "loop/input_lines.h"
#include "model/checkpoint.h"
#include "model/hf_tokenizer.h"

namespace rlcpp::cli {

Command add_score_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("score", "per-token log-probs of given sequences (JSONL in, JSONL out)");
  struct Args {
    std::string checkpoint, input, output, tokenizer;
    float temperature = 1.0f;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory")->required();
  cmd->add_option("--input", a->input, "JSONL: {\"text\": ..., \"eos\": bool} or {\"tokens\": [...]} per line")
      ->required()
      ->check(CLI::ExistingFile);
  add_tokenizer_option(cmd, a->tokenizer);
  cmd->add_option("--out", a->output, "output JSONL (default: stdout)");
  add_float_option(cmd, "--temperature", a->temperature,
                   "score under softmax(logits / temperature); finite and >= 1e-3 (colder overflows fp32)");
  return {cmd, [=]() {
    check_temperature(a->temperature, "score --temperature", /*zero_is_greedy=*/false);
    check_output_is_not_an_input(a->output, {a->input}, "score");
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    Transformer model(params.config());
    const std::unique_ptr<Tokenizer> tokenizer =
        load_tokenizer(choose_tokenizer(a->tokenizer, a->checkpoint), params.config());
    const Tokenizer& tok = *tokenizer;
    std::ifstream in(a->input);
    std::vector<std::vector<int32_t>> seqs;
    std::vector<std::string> where;  // FILE:LINE of each sequence
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      where.push_back(a->input + ":" + std::to_string(n));
      seqs.push_back(parse_score_line(line, where.back(), tok, params.config().vocab_size));
      const int64_t context = params.config().max_position_embeddings;
      RLCPP_CHECK(static_cast<int64_t>(seqs.back().size()) <= context,
                  where.back() << ": " << seqs.back().size() << " tokens, more than the model's context of " << context);
    }
    RLCPP_CHECK(!seqs.empty(), a->input << ": no input lines (one JSON object per line)");
    PackedBatch batch = PackedBatch::from_sequences(seqs);
    const ExecContext host = ExecContext::cpu();
    Activations acts;
    ForwardOptions fwd;
    fwd.temperature = a->temperature;
    model.forward(host, params, batch, fwd, acts);
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
