#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "apps/output_path.h"
#include "apps/commands.h"
#include "apps/float_option.h"
#include "apps/seed_option.h"
#include "apps/tokenizer_options.h"
#include "core/metrics.h"
#include "core/output_file.h"
#include "kernels/temperature.h"
#include "loop/evaluation.h"
#include "loop/input_lines.h"
#include "model/checkpoint.h"
#include "tokenizer/hf_tokenizer.h"
#include "model/numerics.h"
#include "rollout/engine.h"
#include "rollout/request_wire.h"

namespace rlcpp::cli {

Command add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "sample completions of prompts with a checkpoint (rollout engine)");
  struct Args {
    std::string checkpoint, prompt, prompts_file, out, tokenizer;
    ChatOptions chat;
    SamplingParams sampling;
    EngineConfig engine;
    int64_t n = 1;
    std::string dtype = "fp32", quantization = "none", device = "cpu";
    bool batch_invariant = true, show_prompt = false;
  };
  auto a = std::make_shared<Args>();
  a->sampling.temperature = 0;
  a->sampling.max_new_tokens = 8;
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory")->required();
  auto* one = cmd->add_option("--prompt", a->prompt, "one prompt text, e.g. \"123+456=\"");
  auto* many = cmd->add_option("--prompts", a->prompts_file,
                               "JSONL of {\"prompt\": text}, {\"messages\": [{\"role\", \"content\"}, ...]} (chat "
                               "template) or {\"tokens\": [ids]}, optional \"id\"");
  one->excludes(many);
  const RequestLimits limits;
  cmd->add_option("--n", a->n, "samples per prompt (a group shares its prompt's prefill and KV blocks)")
      ->check(CLI::Range(int64_t{1}, limits.max_n));
  add_float_option(cmd, "--temperature", a->sampling.temperature,
                   "sampling temperature: 0 = greedy, else finite and >= 1e-3 (colder overflows fp32)");
  cmd->add_option("--top-k", a->sampling.top_k, "keep the k most likely tokens (0 = off)");
  add_float_option(cmd, "--top-p", a->sampling.top_p, "nucleus mass (1 = off)");
  add_seed_option(cmd, "--seed", a->sampling.seed, "sampling seed (a non-negative integer)");
  cmd->add_option("--max-new-tokens", a->sampling.max_new_tokens, "response length limit");
  cmd->add_option("--stop", a->sampling.stop_tokens, "token ids that end a response (besides EOS)");
  cmd->add_flag("--ignore-eos", a->sampling.ignore_eos, "keep sampling past EOS");
  add_tokenizer_option(cmd, a->tokenizer);
  add_chat_options(cmd, a->chat);
  cmd->add_flag("--show-prompt", a->show_prompt,
                "print each prompt as the model sees it first (the rendered chat template, special tokens written "
                "out) with its token count");
  cmd->add_option("--out", a->out, "write one JSON line per sample here (default: print)");
  cmd->add_option("--dtype", a->dtype,
                  "compute dtype of the engine: fp32, bf16, fp16 (model/numerics.h), or tf32 on a cuda --device "
                  "with --batch-invariant false");
  cmd->add_option("--quantization", a->quantization, "decoder Linear weights: none, int8 or fp8_e4m3");
  cmd->add_option("--batch-invariant", a->batch_invariant,
                  "true: packed batch-invariant products; false: OpenBLAS decode (sum order depends on the batch)");
  cmd->add_option("--device", a->device, "where the engine runs: cpu, cuda or cuda:N");
  cmd->add_option("--block-size", a->engine.block_size, "KV-cache block size (tokens)");
  cmd->add_option("--num-blocks", a->engine.num_blocks, "KV-cache blocks (0 = automatic)");
  cmd->add_option("--max-num-seqs", a->engine.max_num_seqs, "sequences decoded together");
  auto* batched =
      cmd->add_option("--max-batched-tokens", a->engine.max_num_batched_tokens,
                      "rows per forward (default 8192, or the longest prompt and its response when larger)");
  return {cmd, [=]() {
    // `--prompt ""` is a prompt (BOS alone, or the chat template's turn), as {"prompt": ""} in a file is.
    RLCPP_CHECK(one->count() > 0 || !a->prompts_file.empty(), "generate: give --prompt TEXT or --prompts FILE.jsonl");
    check_temperature(a->sampling.temperature, "generate --temperature", /*zero_is_greedy=*/true);
    parse_device_spec(a->device, "generate --device");  // a misspelling is named before the checkpoint loads
    std::vector<std::string> inputs = tokenizer_inputs(a->tokenizer);
    inputs.insert(inputs.end(), {a->checkpoint, a->prompts_file});
    check_output_is_not_an_input(a->out, inputs, "generate");
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    const ModelNumerics numerics =
        make_numerics(a->dtype, a->quantization, a->batch_invariant, "--dtype", "--quantization");
    check_numerics_device(numerics, parse_device_spec(a->device, "generate --device").device, "--dtype",
                          "--batch-invariant");
    const std::unique_ptr<Tokenizer> tokenizer =
        load_tokenizer(choose_tokenizer(a->tokenizer, a->checkpoint), params.config(), a->chat);
    const Tokenizer& tok = *tokenizer;
    std::vector<PromptLine> prompts;
    if (!a->prompts_file.empty()) {
      prompts = read_prompt_lines(a->prompts_file, tok);
    } else {
      prompts.push_back({a->prompt, encode_prompt(tok, a->prompt), 0});
    }
    if (a->show_prompt)
      for (size_t i = 0; i < prompts.size(); ++i)
        std::printf("prompt %zu (%zu tokens):\n%s\n", i, prompts[i].tokens.size(),
                    tok.render(prompts[i].tokens).c_str());
    const int64_t context = params.config().max_position_embeddings;
    for (const PromptLine& p : prompts)
      RLCPP_CHECK(static_cast<int64_t>(p.tokens.size()) < context,
                  p.where << ": the prompt has " << p.tokens.size() << " tokens; the model's context of " << context
                          << " leaves no room for a new token");
    RLCPP_CHECK(static_cast<int64_t>(prompts.size()) * a->n <= limits.max_sequences,
                "generate: " << prompts.size() << " prompts x --n " << a->n << " is more than "
                             << limits.max_sequences << " sequences");
    Request req;
    req.n = a->n;
    req.sampling = a->sampling;
    for (const PromptLine& p : prompts) {
      req.prompts.push_back(p.tokens);
      req.prompt_ids.push_back(p.id);
    }
    // The engine's context is what these prompts need, the longest one and its response: its KV cache and RoPE
    // table follow use, not the model's context (2^22 positions would take gigabytes for a short prompt).
    int64_t longest = 0;
    for (const PromptLine& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.tokens.size()));
    EngineConfig engine_config = a->engine;
    const int64_t response = std::clamp<int64_t>(a->sampling.max_new_tokens, 1, context);
    engine_config.max_context = std::min(context, longest + response);
    // Any one prefill must fit in a step: a long prompt raises the default.
    if (batched->count() == 0)
      engine_config.max_num_batched_tokens =
          std::max(engine_config.max_num_batched_tokens, engine_config.max_context);
    const Transformer model(engine_model_config(params.config(), engine_config), numerics);
    const int64_t vocab = params.config().vocab_size;
    Engine engine(model, params, engine_config, 0, context_for_device(a->device, "generate --device"));
    engine.take_weights(std::move(params), 0);  // a bf16 engine holds its weights in bf16 alone
    const RolloutResult result = engine.generate(req);
    // Before any output: a NaN would print as null (JSON) or -nan and pass for a log-prob.
    for (const Sample& s : result.samples)
      for (size_t t = 0; t < s.logprobs.size(); ++t)
        RLCPP_CHECK(std::isfinite(s.logprobs[t]), prompts[s.prompt_index].where
                                                      << ": sample " << s.sample_index << ": the log-prob of token "
                                                      << t << " is " << s.logprobs[t]
                                                      << " (the checkpoint's logits overflow or are not finite)");
    // Text for a tokenizer.json, and for the character tokenizer when the model is one of its vocabulary.
    const bool text = tok.charset().empty() || vocab == tok.vocab_size();
    std::optional<OutputFile> file;
    if (!a->out.empty()) file.emplace(a->out, OutputFile::Mode::kReplace);
    for (const Sample& s : result.samples) {
      const PromptLine& p = prompts[s.prompt_index];
      const std::string response = text ? tok.decode(s.tokens) : std::string();
      if (file) {
        Json j{{"prompt_index", s.prompt_index}, {"prompt_id", p.id},          {"sample_index", s.sample_index},
               {"tokens", s.tokens},             {"logprobs", s.logprobs},     {"finish_reason", finish_reason_name(s.finish_reason)},
               {"policy_version", s.policy_version}, {"first_token_s", s.first_token_s}, {"finished_s", s.finished_s}};
        if (!p.text.empty()) j["prompt"] = p.text;
        if (text) j["response"] = response;
        file->write(j.dump() + "\n");
      } else {
        double sum = 0;
        for (float lp : s.logprobs) sum += lp;
        std::printf("%s%s%s\t(logprob %.4f, %s)\n", p.text.c_str(), response.c_str(),
                    s.finish_reason == FinishReason::kEos ? "<eos>" : "", sum, finish_reason_name(s.finish_reason));
      }
    }
    if (file) {
      file->close();
      // With --out, stdout is free for the run's summary and memory report.
      const RolloutStats& st = result.stats;
      std::printf("generate: %lld samples, %lld sampled tokens in %.2fs (%s sampled tok/s, %s), %lld steps, %lld "
                  "preemptions; KV %lld bytes/token, peak %lld of %lld blocks (%lld without prefix sharing, %.2f "
                  "MiB saved) -> %s\n",
                  static_cast<long long>(st.sequences), static_cast<long long>(st.generated_tokens), st.wall_s,
                  format_rate(st.generated_tokens / std::max(st.wall_s, 1e-9)).c_str(),
                  model.numerics().describe().c_str(),
                  static_cast<long long>(st.steps), static_cast<long long>(st.preemptions),
                  static_cast<long long>(st.kv_bytes_per_token), static_cast<long long>(st.peak_blocks_in_use),
                  static_cast<long long>(st.num_blocks), static_cast<long long>(st.peak_blocks_unshared),
                  st.bytes_saved_by_sharing() / 1048576.0, a->out.c_str());
    }
    return 0;
  }};
}

}  // namespace rlcpp::cli
