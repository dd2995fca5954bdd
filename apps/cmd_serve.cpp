#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "apps/commands.h"
#include "apps/seed_option.h"
#include "apps/tokenizer_options.h"
#include "core/error.h"
#include "core/stop_signals.h"
#include "model/checkpoint.h"
#include "tokenizer/hf_tokenizer.h"
#include "model/init.h"
#include "model/numerics.h"
#include "rollout/engine.h"
#include "rollout/serve_http.h"
#include "rollout/serve_loop.h"

namespace rlcpp::cli {

Command add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve", "an OpenAI-compatible HTTP server over the rollout engine (README \"Serving\")");
  struct Args {
    std::string checkpoint, preset, tokenizer;
    uint64_t init_seed = 0;
    ServeOptions serve;
    EngineConfig engine;
    std::string dtype = "fp32", quantization = "none", device = "cpu";
    bool batch_invariant = true;
  };
  auto a = std::make_shared<Args>();
  a->engine.max_context = 4096;
  // Serving: a step's rows default to 1,024, or the context when longer (any one prompt must fit a step). Smaller
  // steps than the engine's 8,192 let the decodes of running requests go on between arriving prompts' prefills: at
  // W2 with 64 clients, 162 tokens/s and a 3.7 s median first token, against 106-123 tokens/s and 10-12 s
  // (bench/RESULTS.md).
  a->engine.max_num_batched_tokens = 0;
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory (model.safetensors + config.json)");
  cmd->add_option("--preset", a->preset,
                  "instead of a checkpoint: random weights of a preset (tiny, qwen-tiny, qwen05b) or of a "
                  "config.json's shapes");
  add_seed_option(cmd, "--init-seed", a->init_seed, "seed of the random weights with --preset");
  add_tokenizer_option(cmd, a->tokenizer);
  cmd->add_option("--host", a->serve.host, "address to listen on (anything but loopback needs --api-key)");
  cmd->add_option("--port", a->serve.port, "port (0 = any free port, printed at start)");
  cmd->add_option("--api-key", a->serve.api_key, "require \"Authorization: Bearer KEY\" on /v1 requests");
  cmd->add_option("--model-name", a->serve.model_name,
                  "the model's name in requests and /v1/models (default: the checkpoint directory's or preset's name)");
  cmd->add_option("--max-body-bytes", a->serve.limits.max_body_bytes, "largest request body (413 beyond)");
  cmd->add_option("--max-tokens", a->serve.limits.max_tokens, "largest max_tokens of a request (400 beyond)");
  cmd->add_option("--max-n", a->serve.limits.max_n, "largest n of a request (400 beyond)");
  cmd->add_option("--max-concurrency", a->serve.limits.max_concurrency,
                  "requests served at once; one more is answered 429");
  cmd->add_option("--dtype", a->dtype,
                  "compute dtype of the engine: fp32, bf16, fp16 (model/numerics.h), or tf32 on a cuda --device "
                  "with --batch-invariant false");
  cmd->add_option("--quantization", a->quantization, "decoder Linear weights: none, int8 or fp8_e4m3");
  cmd->add_option("--batch-invariant", a->batch_invariant,
                  "true: packed batch-invariant products (a seeded request samples the same tokens whatever else is "
                  "in the batch); false: OpenBLAS decode");
  cmd->add_option("--device", a->device, "where the engine runs: cpu, cuda or cuda:N");
  cmd->add_option("--block-size", a->engine.block_size, "KV-cache block size (tokens)");
  cmd->add_option("--num-blocks", a->engine.num_blocks, "KV-cache blocks (0 = automatic)");
  cmd->add_option("--max-num-seqs", a->engine.max_num_seqs, "sequences decoded together");
  cmd->add_option("--max-batched-tokens", a->engine.max_num_batched_tokens,
                  "rows per forward (>= --max-context; 0 = 1024, or the context when longer)");
  cmd->add_option("--max-context", a->engine.max_context,
                  "tokens a sequence may reach, prompt and response (capped at the model's context)");
  cmd->add_option("--prefix-cache", a->engine.prefix_cache,
                  "true: full KV blocks of a prompt prefix computed before are reused (rollout/block_manager.h)");
  return {cmd, [=]() {
    require_one_process("serve");
    RLCPP_CHECK(a->checkpoint.empty() != a->preset.empty(), "serve: give a checkpoint directory or --preset");
    if (a->serve.model_name.empty())
      a->serve.model_name = a->preset.empty()
                                ? std::filesystem::path(a->checkpoint).lexically_normal().filename().string()
                                : std::filesystem::path(a->preset).stem().string();  // "tiny"; a config.json's stem
    if (a->serve.model_name.empty()) a->serve.model_name = a->checkpoint;
    check_serve_options(a->serve);
    parse_device_spec(a->device, "serve --device");
    // Blocked in every thread (before any starts) and taken by one that stops the HTTP server; listen() then
    // returns and the loop ends its jobs.
    const sigset_t signals = block_stop_signals("serve");
    ParameterStore params = a->checkpoint.empty() ? init_random(model_shapes(a->preset), a->init_seed)
                                                  : load_model_checkpoint(a->checkpoint);
    const std::unique_ptr<Tokenizer> tok =
        load_tokenizer(choose_tokenizer(a->tokenizer, a->checkpoint), params.config(), ChatOptions{});
    EngineConfig ec = a->engine;
    ec.max_context = std::min(ec.max_context > 0 ? ec.max_context : params.config().max_position_embeddings,
                              params.config().max_position_embeddings);
    constexpr int64_t kServeStepRows = 1024;
    ec.max_num_batched_tokens = std::max(ec.max_num_batched_tokens == 0 ? kServeStepRows : ec.max_num_batched_tokens,
                                         ec.max_context);
    const ModelNumerics numerics =
        make_numerics(a->dtype, a->quantization, a->batch_invariant, "serve --dtype", "serve --quantization");
    check_numerics_device(numerics, parse_device_spec(a->device, "serve --device").device, "serve --dtype",
                          "serve --batch-invariant");
    const Transformer model(engine_model_config(params.config(), ec), numerics);
    const int64_t vocab = params.config().vocab_size;
    Engine engine(model, params, ec, 0, context_for_device(a->device, "serve --device"));
    engine.take_weights(std::move(params), 0);  // a bf16 server holds its weights in bf16 alone
    ServeLoop loop(engine, *tok);
    ServeHttp http(loop, *tok, a->serve, ec.max_context, vocab);
    http.bind();
    std::printf("serve: %s (%s, prefix cache %s) on http://%s:%d, context %lld tokens, %lld KV blocks of %lld\n",
                a->serve.model_name.c_str(), model.numerics().describe().c_str(), ec.prefix_cache ? "on" : "off",
                a->serve.host.c_str(), http.port(), static_cast<long long>(ec.max_context),
                static_cast<long long>(engine.blocks().num_blocks()), static_cast<long long>(ec.block_size));
    std::fflush(stdout);
    std::thread stopper([&] {
      int signal = 0;
      sigwait(&signals, &signal);
      http.stop();
    });
    http.listen();
    // listen() also returns when the socket fails: wake the stopper so it can be joined.
    pthread_kill(stopper.native_handle(), SIGTERM);
    stopper.join();
    std::printf("serve: stopped\n");
    return 0;
  }};
}

}  // namespace rlcpp::cli
