// Parity with Hugging Face `transformers`, both ways, for the families rlcpp runs (Llama, Qwen2):
//   transformers -> rlcpp: tests/hf_parity.py makes a tiny random model with transformers itself and saves it
//     (save_pretrained, safetensors, fp32 or bf16); load_model_checkpoint opens the directory and rlcpp's fp32
//     forward gives transformers' logits.
//   rlcpp -> transformers: save_model_checkpoint's directory opens in AutoModelForCausalLM.from_pretrained with
//     every tensor accounted for, and gives rlcpp's logits; so does an HF checkpoint rlcpp loaded and saved again.
// Logits agree within 1e-4 (absolute; they spread over a few units) on three sequences of 1, 17 and 6 tokens,
// packed in one batch here and run one by one there. The Python is .venv (scripts/ensure_python.sh installs
// the transformers it pins), or $RLCPP_VENV; without it these tests fail rather than skip. The last suites show
// that small deviations exceed the tolerance, and that config.json as transformers 5 writes it loads right.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "test_models.h"
#include "tests/host_context.h"

namespace rlcpp {
namespace {

using testing::host;

namespace fs = std::filesystem;

constexpr double kFp32Tolerance = 1e-4;

struct Arch {
  const char* name;
  const char* model_type;
  bool tie;
  bool bias;  // llama attention_bias
};

void PrintTo(const Arch& a, std::ostream* os) { *os << a.name; }

const Arch kArchs[] = {
    {"llama_untied", "llama", false, false},
    {"llama_tied", "llama", true, false},
    {"llama_bias", "llama", false, true},
    {"qwen2_tied", "qwen2", true, false},
    {"qwen2_untied", "qwen2", false, false},
};

// The shapes hf_parity.py's tiny_config gives transformers: GQA, a non-default rope_theta and rms_norm_eps.
ModelConfig parity_config(const Arch& a) {
  ModelConfig c;
  c.model_type = a.model_type;
  c.vocab_size = 128;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.intermediate_size = 128;
  c.max_position_embeddings = 64;
  const bool llama = c.model_type == "llama";
  c.rope_theta = llama ? 5e5 : 1e6;
  c.rms_norm_eps = llama ? 1e-5 : 1e-6;
  c.tie_word_embeddings = a.tie;
  c.attention_bias = a.bias;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.pad_token_id = 0;
  return c;
}

// rlcpp's own random model at the scale hf_parity.py gives transformers' (std 0.15; norms and biases random).
ParameterStore parity_params(const ModelConfig& cfg, uint64_t seed) {
  ParameterStore p = init_random(cfg, seed);
  PhiloxStream rng(seed, 77);
  for (const auto& info : p.infos()) {
    const bool norm = info.name.ends_with("norm.weight"), bias = info.name.ends_with(".bias");
    Tensor t = p.get(info.name);
    for (int64_t i = 0; i < t.numel(); ++i) {
      float& x = t.data<float>()[i];
      x = norm ? 1.0f + 0.2f * rng.normal() : bias ? 0.5f * rng.normal() : 7.5f * x;
    }
  }
  return p;
}

// 1, 17 and 6 tokens; the last holds the pad id and the vocabulary's ends.
std::vector<std::vector<int32_t>> parity_sequences(int64_t vocab) {
  const int32_t last = static_cast<int32_t>(vocab - 1);
  return {{42}, random_test_tokens(17, vocab, 7), {0, last, 1, 2, last, 64}};
}

std::string sequences_json(const std::vector<std::vector<int32_t>>& seqs) {
  std::string s = "[";
  for (size_t i = 0; i < seqs.size(); ++i) {
    s += i ? ",[" : "[";
    for (size_t t = 0; t < seqs[i].size(); ++t) s += (t ? "," : "") + std::to_string(seqs[i][t]);
    s += "]";
  }
  return s + "]";
}

std::string venv_python() {
  if (const char* v = std::getenv("RLCPP_VENV"); v && *v) return std::string(v) + "/bin/python";
  const char* src = std::getenv("RLCPP_SOURCE_DIR");
  return std::string(src && *src ? src : RLCPP_SOURCE_DIR) + "/.venv/bin/python";
}

struct PyResult {
  int status = 0;
  std::string output;  // stdout and stderr
};

PyResult run_hf_parity(const std::string& args) {
  const std::string cmd = "'" + venv_python() + "' '" + RLCPP_SOURCE_DIR + "/tests/hf_parity.py' " + args + " 2>&1";
  PyResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {-1, "popen failed: " + cmd};
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  r.status = pclose(pipe);
  if (r.status != 0) r.output = cmd + "\n" + r.output;
  return r;
}

// The same, when it must succeed: a failure is an Error carrying the command and what it printed.
void run_hf_parity_or_throw(const std::string& args) {
  const PyResult r = run_hf_parity(args);
  if (r.status != 0) throw Error("hf_parity.py failed (status " + std::to_string(r.status) + "): " + r.output);
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// Rows of every sequence back to back: (N, V).
Tensor rlcpp_logits(const ParameterStore& params, const std::vector<std::vector<int32_t>>& seqs,
                    const ModelConfig& cfg) {
  const Transformer model(cfg);
  Activations acts;
  model.forward(host(), params, PackedBatch::from_sequences(seqs), ForwardOptions{}, acts);
  return acts.logits;
}
Tensor rlcpp_logits(const ParameterStore& params, const std::vector<std::vector<int32_t>>& seqs) {
  return rlcpp_logits(params, seqs, params.config());
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) {
    ADD_FAILURE() << "logits shapes differ: " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
    return INFINITY;
  }
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    d = std::max(d, std::fabs(x - y));
  }
  return d;
}

class HfParity : public ::testing::TestWithParam<Arch> {
 protected:
  void SetUp() override {
    const std::string py = venv_python();
    ASSERT_EQ(::access(py.c_str(), X_OK), 0)
        << py << " not found: run scripts/ensure_python.sh (it creates .venv with the pinned transformers; "
        << "scripts/test.sh runs it before ctest), or point $RLCPP_VENV at such an environment";
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();  // Test/arch
    std::replace(test.begin(), test.end(), '/', '_');
    dir_ = fs::temp_directory_path() / ("rlcpp_hf_parity_" + test + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // transformers' model saved in dir_/name; returns its logits (hf_parity.py make).
  Tensor make_hf(const std::string& name, uint64_t seed, const std::string& dtype = "float32") {
    const Arch& a = GetParam();
    run_hf_parity_or_throw(std::string("make --arch ") + a.model_type + (a.tie ? " --tie" : "") +
                           (a.bias ? " --bias" : "") + " --seed " + std::to_string(seed) + " --dtype " + dtype +
                           " --out " + quoted(dir_ / name) + " --sequences '" + json_ + "'");
    return read_logits(dir_ / name / "logits.safetensors");
  }
  // transformers' logits of the checkpoint in dir_/name (hf_parity.py logits).
  Tensor hf_logits(const std::string& name) {
    const fs::path out = dir_ / (name + ".logits.safetensors");
    run_hf_parity_or_throw("logits --dir " + quoted(dir_ / name) + " --out " + quoted(out) + " --sequences '" +
                           json_ + "'");
    return read_logits(out);
  }
  Tensor read_logits(const fs::path& path) {
    SafetensorsFile f = read_safetensors(path.string());
    versions_ = "transformers " + f.metadata["transformers"] + ", torch " + f.metadata["torch"];
    return f.tensors.at("logits");
  }
  void report(const std::string& what, double diff) {
    std::printf("[hf parity] %s %s: max |logit diff| %.3g (%s)\n", GetParam().name, what.c_str(), diff,
                versions_.c_str());
    RecordProperty("max_abs_logit_diff", std::to_string(diff));
  }

  const ModelConfig cfg_ = parity_config(GetParam());
  const std::vector<std::vector<int32_t>> seqs_ = parity_sequences(cfg_.vocab_size);
  const std::string json_ = sequences_json(seqs_);
  fs::path dir_;
  std::string versions_;  // of the last logits read
};

TEST_P(HfParity, TransformersCheckpointLoadsAndGivesItsLogits) {
  const Tensor expected = make_hf("hf", 11);
  const ParameterStore params = load_model_checkpoint((dir_ / "hf").string());
  // config.json as transformers writes it (with its extra keys) reads as the config it was made from.
  EXPECT_EQ(model_config_to_hf_json(params.config()).dump(), model_config_to_hf_json(cfg_).dump());
  const double diff = max_abs_diff(rlcpp_logits(params, seqs_), expected);
  report("transformers -> rlcpp", diff);
  EXPECT_LE(diff, kFp32Tolerance);
}

TEST_P(HfParity, Bf16TransformersCheckpointLoadsAndGivesItsLogits) {
  // The checkpoint holds bf16 weights; transformers' logits are those of the same values in fp32.
  const Tensor expected = make_hf("hf_bf16", 12, "bfloat16");
  const ParameterStore params = load_model_checkpoint((dir_ / "hf_bf16").string());
  const double diff = max_abs_diff(rlcpp_logits(params, seqs_), expected);
  report("transformers bf16 -> rlcpp", diff);
  EXPECT_LE(diff, kFp32Tolerance);
}

TEST_P(HfParity, RlcppCheckpointOpensInTransformersWithTheSameLogits) {
  const ParameterStore params = parity_params(cfg_, 13);
  save_model_checkpoint((dir_ / "rlcpp").string(), params);
  const double diff = max_abs_diff(hf_logits("rlcpp"), rlcpp_logits(params, seqs_));
  report("rlcpp -> transformers", diff);
  EXPECT_LE(diff, kFp32Tolerance);
}

// A bf16 (or fp16) checkpoint rlcpp writes (`rlcpp export --dtype bf16`) opens in transformers with the logits rlcpp
// computes from the same file: the rounded weights, read back exactly on both sides.
TEST_P(HfParity, Bf16And16BitCheckpointsRlcppWritesOpenInTransformers) {
  const ParameterStore params = parity_params(cfg_, 15);
  for (const auto& [dtype, name] : {std::pair{DType::kBF16, "rlcpp_bf16"}, {DType::kF16, "rlcpp_fp16"}}) {
    save_model_checkpoint((dir_ / name).string(), params, false, {}, dtype);
    const SafetensorsFile f = read_safetensors((dir_ / name / "model.safetensors").string());
    for (const auto& [tensor, t] : f.tensors) EXPECT_EQ(t.dtype(), dtype) << tensor;
    const ParameterStore loaded = load_model_checkpoint((dir_ / name).string());
    const double diff = max_abs_diff(hf_logits(name), rlcpp_logits(loaded, seqs_));
    report(std::string("rlcpp ") + name + " -> transformers", diff);
    EXPECT_LE(diff, kFp32Tolerance);
    EXPECT_GT(max_abs_diff(rlcpp_logits(loaded, seqs_), rlcpp_logits(params, seqs_)), 0.0) << "the weights were rounded";
  }
}

TEST_P(HfParity, TransformersCheckpointSavedByRlcppReopensInTransformers) {
  const Tensor original = make_hf("hf", 14);
  save_model_checkpoint((dir_ / "resaved").string(), load_model_checkpoint((dir_ / "hf").string()));
  const double diff = max_abs_diff(hf_logits("resaved"), original);
  report("transformers -> rlcpp -> transformers", diff);
  EXPECT_LE(diff, kFp32Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Archs, HfParity, ::testing::ValuesIn(kArchs),
                         [](const ::testing::TestParamInfo<Arch>& info) { return std::string(info.param.name); });

// The comparisons above can fail: a wrong rope_theta or rms_norm_eps, or one weight off by 0.01, moves the
// logits past the tolerance; and hf_parity.py refuses a checkpoint that lacks a tensor (from_pretrained would
// initialise it at random and only warn).
class HfParitySensitivity : public HfParity {};

TEST_P(HfParitySensitivity, SmallDeviationsExceedTheTolerance) {
  const Tensor expected = make_hf("hf", 11);
  const ParameterStore params = load_model_checkpoint((dir_ / "hf").string());
  ASSERT_LE(max_abs_diff(rlcpp_logits(params, seqs_), expected), kFp32Tolerance);

  auto expect_noticed = [&](const std::string& what, const Tensor& logits, double above) {
    const double diff = max_abs_diff(logits, expected);
    report("with " + what, diff);
    EXPECT_GT(diff, above) << what << " went unnoticed";
  };
  ModelConfig other_theta = params.config();
  other_theta.rope_theta = 1e4;
  expect_noticed("rope_theta 1e4", rlcpp_logits(params, seqs_, other_theta), 100 * kFp32Tolerance);
  ModelConfig other_eps = params.config();
  other_eps.rms_norm_eps *= 10;
  expect_noticed("rms_norm_eps x10", rlcpp_logits(params, seqs_, other_eps), kFp32Tolerance);
  for (const char* name : {"model.layers.0.self_attn.v_proj.weight", "model.layers.1.mlp.down_proj.weight",
                           "model.norm.weight"}) {
    ParameterStore perturbed = params.clone();
    perturbed.get(name).data<float>()[5] += 0.01f;
    expect_noticed(std::string(name) + "[5] + 0.01", rlcpp_logits(perturbed, seqs_), kFp32Tolerance);
  }

  // A checkpoint missing one tensor: transformers must not open it (random init) silently.
  save_model_checkpoint((dir_ / "incomplete").string(), params);
  const std::string weights = (dir_ / "incomplete" / "model.safetensors").string();
  SafetensorsFile f = read_safetensors(weights);
  const std::string dropped = "model.layers.1.self_attn.k_proj.weight";
  ASSERT_EQ(f.tensors.erase(dropped), 1u);
  write_safetensors(weights, {f.tensors.begin(), f.tensors.end()}, f.metadata);
  const PyResult r = run_hf_parity("logits --dir " + quoted(dir_ / "incomplete") + " --out " +
                                   quoted(dir_ / "incomplete.safetensors") + " --sequences '" + json_ + "'");
  EXPECT_NE(r.status, 0) << "transformers opened a checkpoint without " << dropped << ":\n" << r.output;
  EXPECT_NE(r.output.find(dropped), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Archs, HfParitySensitivity, ::testing::Values(kArchs[2], kArchs[3]),
                         [](const ::testing::TestParamInfo<Arch>& info) { return std::string(info.param.name); });

// transformers >= 5 (which needs a newer torch than Debian's, so the pinned 4.49 cannot write it) saves RoPE as
// "rope_parameters": {"rope_type": "default", "rope_theta": ...} without a top-level rope_theta. The 4.49
// checkpoint's config.json rewritten that way must load with the same logits (not with rope_theta's default
// 1e4), and RoPE types rlcpp does not implement must be refused, as rope_scaling is.
class HfParityTransformers5Config : public HfParity {};

TEST_P(HfParityTransformers5Config, RopeParametersAreReadOrRefused) {
  const Tensor expected = make_hf("hf", 11);
  const fs::path config_path = dir_ / "hf" / "config.json";
  Json config = load_json_file(config_path.string());
  const double theta = config["rope_theta"].get<double>();
  config.erase("rope_theta");
  config.erase("rope_scaling");
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", theta}};
  write_json_file_atomic(config_path.string(), config);
  const ParameterStore params = load_model_checkpoint((dir_ / "hf").string());
  EXPECT_EQ(params.config().rope_theta, theta);
  const double diff = max_abs_diff(rlcpp_logits(params, seqs_), expected);
  report("transformers (rope_parameters) -> rlcpp", diff);
  EXPECT_LE(diff, kFp32Tolerance);

  auto refused = [&](const Json& bad, const std::string& message) {
    try {
      model_config_from_hf_json(bad, "config.json");
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted " << bad.dump();
  };
  Json scaled = config;
  scaled["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", theta}, {"factor", 8.0}};
  refused(scaled, "config.json: rope_parameters");
  Json per_layer = config;
  per_layer["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", theta}}}};
  refused(per_layer, "config.json: rope_parameters");
  Json sliding = config;
  sliding["use_sliding_window"] = true;
  refused(sliding, "use_sliding_window");
}

INSTANTIATE_TEST_SUITE_P(Archs, HfParityTransformers5Config, ::testing::Values(kArchs[4]),
                         [](const ::testing::TestParamInfo<Arch>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace rlcpp
