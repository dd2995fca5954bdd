#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "apps/output_path.h"
#include "apps/commands.h"
#include "apps/float_option.h"
#include "apps/tokenizer_options.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "kernels/temperature.h"
#include "loop/evaluation.h"
#include "loop/input_lines.h"
#include "model/checkpoint.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp::cli {

namespace {

// Rows of one `score` forward: lines are scored in batches of whole lines up to this many tokens (a line longer
// than it, at most the model's context, is a batch of its own), so memory does not grow with the input.
constexpr int64_t kScoreBatchTokens = 4096;

}  // namespace

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
    std::vector<std::string> inputs = tokenizer_inputs(a->tokenizer);
    inputs.insert(inputs.end(), {a->checkpoint, a->input});
    check_output_is_not_an_input(a->output, inputs, "score");
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    Transformer model(params.config());
    const std::unique_ptr<Tokenizer> tokenizer =
        load_tokenizer(choose_tokenizer(a->tokenizer, a->checkpoint), params.config());
    const Tokenizer& tok = *tokenizer;
    const InputFile in(a->input, kDatasetInput.named("a JSONL file of sequences to score"));
    const int64_t context = params.config().max_position_embeddings;
    // Each non-blank line as its token ids, checked against the vocabulary and the context.
    const auto read_lines = [&](const std::function<void(std::vector<int32_t>, std::string)>& take) {
      in.for_each_line([&](std::string_view line, int64_t number) {
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
        std::string where = a->input + ":" + std::to_string(number);
        std::vector<int32_t> ids = parse_score_line(std::string(line), where, tok, params.config().vocab_size);
        RLCPP_CHECK(static_cast<int64_t>(ids.size()) <= context,
                    where << ": " << ids.size() << " tokens, more than the model's context of " << context);
        take(std::move(ids), std::move(where));
      });
    };
    // Every line is checked before anything is written; then the lines are scored in batches of at most
    // kScoreBatchTokens tokens (memory bounded whatever the number of lines), their output in input order.
    int64_t lines = 0;
    read_lines([&](std::vector<int32_t>, std::string) { ++lines; });
    RLCPP_CHECK(lines > 0, a->input << ": no input lines (one JSON object per line)");
    std::optional<OutputFile> file;
    if (!a->output.empty()) file.emplace(a->output, OutputFile::Mode::kReplace);
    OutputFile standard_output;
    OutputFile& out = file ? *file : standard_output;
    // No cache of freed blocks: batches of other sizes would fill it with blocks of many sizes (up to its 1 GiB);
    // a batch's buffers are few and large, so taking them from the system each time costs nothing measurable.
    const ExecContext host = ExecContext::cpu(/*max_cached_bytes=*/0);
    Activations acts;  // reused by every batch
    ForwardOptions fwd;
    fwd.temperature = a->temperature;
    fwd.keep_activations = false;  // scoring: no backward follows
    std::vector<std::vector<int32_t>> seqs;
    std::vector<std::string> where;  // FILE:LINE of each sequence
    int64_t batch_tokens = 0;
    const auto score_batch = [&] {
      const PackedBatch batch = PackedBatch::from_sequences(seqs);
      model.forward(host, params, batch, fwd, acts);
      // Before the batch's output: a NaN would print as null (JSON) or -nan and pass for a score.
      const float* logp = acts.logp.data<float>();
      for (size_t s = 0; s < seqs.size(); ++s)
        for (int32_t t = batch.cu_seqlens[s]; t + 1 < batch.cu_seqlens[s + 1]; ++t)
          RLCPP_CHECK(std::isfinite(logp[t]), where[s] << ": the log-prob of token " << t - batch.cu_seqlens[s] + 1
                                                       << " is " << logp[t]
                                                       << " (the checkpoint's logits overflow or are not finite)");
      for (size_t s = 0; s < seqs.size(); ++s) {
        // logprobs[t] = log p(token t+1 | tokens 0..t)
        const std::vector<float> lp(logp + batch.cu_seqlens[s], logp + batch.cu_seqlens[s + 1] - 1);
        double sum = 0;
        for (float x : lp) sum += x;
        out.write(Json{{"tokens", seqs[s]}, {"logprobs", lp}, {"sum_logprob", sum}}.dump() + "\n");
      }
      seqs.clear();
      where.clear();
      batch_tokens = 0;
    };
    read_lines([&](std::vector<int32_t> ids, std::string at) {
      if (!seqs.empty() && batch_tokens + static_cast<int64_t>(ids.size()) > kScoreBatchTokens) score_batch();
      batch_tokens += static_cast<int64_t>(ids.size());
      seqs.push_back(std::move(ids));
      where.push_back(std::move(at));
    });
    if (!seqs.empty()) score_batch();
    out.close();
    return 0;
  }};
}

}  // namespace rlcpp::cli
