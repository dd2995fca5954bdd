// The run ledger (report/ledger.h): every formula against a hand computation for W1 and W2
// (docs/benchmarks.md), ratios against given measurements, "—" for what was not measured; the machine
// yardsticks (kernels/machine_peaks.h) and the /proc/self/status reader (core/process_memory.h) behind it.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/process_memory.h"
#include "kernels/machine_peaks.h"
#include "report/ledger.h"
#include "model/lora.h"
#include "model/parameters.h"

namespace rlcpp {
namespace {

// A number is "not measured" exactly when it is NaN.
void expect_not_measured(double v) { EXPECT_TRUE(std::isnan(v)) << v; }

TEST(Ledger, W1FormulasMatchHandComputation) {
  // W1: V=32 C=128 L=4 Hq=4 Hkv=2 d=32 F=352, tied.
  // Per layer: 2·128 + 128·(4+2·2)·32 + 4·32·128 + 3·128·352 = 256 + 32768 + 16384 + 135168 = 184576.
  // N = 32·128 + 4·184576 + 128 = 4096 + 738304 + 128 = 742528.
  const std::vector<LedgerLine> lines = build_ledger(model_preset("tiny"), LedgerFigures{});
  EXPECT_EQ(ledger_line(lines, "parameters").formula_value, 742528.0);
  EXPECT_EQ(ledger_line(lines, "training_memory").formula_value, 16.0 * 742528);  // 11,880,448 B
  EXPECT_EQ(ledger_line(lines, "kv_bytes_per_token").formula_value, 2.0 * 4 * 2 * 32 * 4);  // 2048 B
  EXPECT_EQ(ledger_line(lines, "train_flops_per_token").formula_value, 4455168.0);  // 6N
  EXPECT_EQ(ledger_line(lines, "inference_flops_per_token").formula_value, 1485056.0);  // 2N
  for (const LedgerLine& line : lines) expect_not_measured(line.measured);
  // Figures that need a measurement to exist are not made up.
  expect_not_measured(ledger_line(lines, "train_mfu").formula_value);
  expect_not_measured(ledger_line(lines, "decode_floor").formula_value);
}

TEST(Ledger, W2FormulasMatchHandComputation) {
  // W2 (Qwen2.5-0.5B shapes): V=151936 C=896 L=24 Hq=14 Hkv=2 d=64 F=4864, q/k/v bias, tied.
  // Per layer: 2·896 + 896·1152 + 896·896 + 3·896·4864 + 1152 (bias)
  //          = 1792 + 1032192 + 802816 + 13074432 + 1152 = 14912384.
  // N = 151936·896 + 24·14912384 + 896 = 136134656 + 357897216 + 896 = 494032768 (Qwen2.5-0.5B's count).
  LedgerDtypes bf16;
  bf16.kv_cache = 2;
  bf16.weights = 2;
  LedgerFigures f;
  f.memory_bandwidth = 4.8e12;  // H200 HBM, docs/benchmarks.md "Limits"
  const std::vector<LedgerLine> lines = build_ledger(model_preset("qwen05b"), f, bf16);
  EXPECT_EQ(ledger_line(lines, "parameters").formula_value, 494032768.0);
  EXPECT_EQ(ledger_line(lines, "training_memory").formula_value, 7904524288.0);
  EXPECT_EQ(ledger_line(lines, "kv_bytes_per_token").formula_value, 12288.0);  // 2·24·2·64·2
  EXPECT_EQ(ledger_line(lines, "train_flops_per_token").formula_value, 2964196608.0);
  // 2·494032768 B / 4.8e12 B/s = 0.2058 ms: docs/benchmarks.md's "≈ 0.2 ms".
  EXPECT_NEAR(ledger_line(lines, "decode_floor").formula_value, 988065536.0 / 4.8e12, 1e-18);
  // fp32 cache: 2·24·2·64·4.
  EXPECT_EQ(ledger_line(build_ledger(model_preset("qwen05b"), f), "kv_bytes_per_token").formula_value, 24576.0);
  // LoRA rank 16 on all seven Linear layers: per layer 16·((896+896) + 2·(896+128) + (896+896) + 3·(896+4864))
  // = 366592 adapter parameters, 8798208 in all (what the LoRA config's run prints); memory 8 B·N + 16 B·Na.
  LoraConfig lora;
  lora.rank = 16;
  const int64_t adapters = LoraAdapters(model_preset("qwen05b"), lora).weights().numel();
  EXPECT_EQ(adapters, 8798208);
  bf16.adapter_parameters = adapters;
  EXPECT_EQ(ledger_line(build_ledger(model_preset("qwen05b"), f, bf16), "training_memory").formula_value,
            8.0 * 494032768 + 16.0 * 8798208);
  bf16.lora_base = 2;  // trainer.lora.base_dtype bf16: 6 B·N
  const LedgerLine bf16_base = ledger_line(build_ledger(model_preset("qwen05b"), f, bf16), "training_memory");
  EXPECT_EQ(bf16_base.formula_value, 6.0 * 494032768 + 16.0 * 8798208);
  EXPECT_NE(bf16_base.formula.find("6 B·N + 16 B·Na = (2 base + 4 merged)"), std::string::npos) << bf16_base.formula;
}

TEST(Ledger, ParameterFormulaCountsEveryLayoutVariant) {
  // The formula is written out independently of parameter_layout; they must agree for every variant.
  std::vector<ModelConfig> configs;
  ModelConfig untied_bias = model_preset("tiny");
  untied_bias.tie_word_embeddings = false;
  untied_bias.attention_bias = true;
  configs.push_back(untied_bias);
  ModelConfig qwen_untied = model_preset("tiny");
  qwen_untied.model_type = "qwen2";
  qwen_untied.tie_word_embeddings = false;
  configs.push_back(qwen_untied);
  ModelConfig critic = model_preset("tiny");
  critic.value_head = true;
  configs.push_back(critic);
  ModelConfig qwen3 = model_preset("tiny");  // q/k norms, and a head_dim other than C / Hq
  qwen3.model_type = "qwen3";
  qwen3.explicit_head_dim = 2 * qwen3.hidden_size / qwen3.num_attention_heads;
  configs.push_back(qwen3);
  ModelConfig qwen3_bias = qwen3;
  qwen3_bias.attention_bias = true;
  configs.push_back(qwen3_bias);
  for (const ModelConfig& c : configs) {
    int64_t counted = 0;
    for (const ParameterInfo& p : parameter_layout(c)) counted += p.numel();
    EXPECT_EQ(ledger_line(build_ledger(c, {}), "parameters").formula_value, static_cast<double>(counted))
        << ledger_symbols(c);
  }
}

TEST(Ledger, MeasuredFiguresGiveRatios) {
  LedgerFigures f;
  f.parameters = 742528;
  f.resident_bytes = 4 * 11880448.0;
  f.engine_kv_bytes_per_token = 2048;
  f.train_tokens_per_s = 10000;
  f.engine_tokens_per_s = 50000;
  f.matmul_peak_flops = 1e11;
  f.memory_bandwidth = 1e10;
  f.engine_step_s = 1e-3;
  const std::vector<LedgerLine> lines = build_ledger(model_preset("tiny"), f);
  EXPECT_EQ(ledger_line(lines, "parameters").ratio, 1.0);
  EXPECT_DOUBLE_EQ(ledger_line(lines, "training_memory").ratio, 4.0);
  EXPECT_EQ(ledger_line(lines, "kv_bytes_per_token").ratio, 1.0);
  // 6 · 742528 · 1e4 = 4.455168e10 FLOP/s over 1e11: MFU 0.4455168.
  EXPECT_DOUBLE_EQ(ledger_line(lines, "train_mfu").formula_value, 4.455168e10);
  EXPECT_DOUBLE_EQ(ledger_line(lines, "train_mfu").ratio, 0.4455168);
  // 2 · 742528 · 5e4 = 7.42528e10 over 1e11.
  EXPECT_DOUBLE_EQ(ledger_line(lines, "rollout_mfu").ratio, 0.742528);
  // Floor 4 · 742528 B / 1e10 B/s = 297.0112 µs; a 1 ms step is 3.367 floors.
  EXPECT_DOUBLE_EQ(ledger_line(lines, "decode_floor").formula_value, 2.970112e-4);
  EXPECT_DOUBLE_EQ(ledger_line(lines, "decode_floor").ratio, 1e-3 / 2.970112e-4);
}

// A role whose products are bf16 is measured against the bf16 product's peak, the other against sgemm's.
TEST(Ledger, ABf16RolesMfuIsAgainstTheBf16Peak) {
  LedgerFigures f;
  f.train_tokens_per_s = 10000;
  f.engine_tokens_per_s = 50000;
  f.matmul_peak_flops = 1e11;
  f.bf16_matmul_peak_flops = 4e11;
  LedgerDtypes bf16_trainer;
  bf16_trainer.trainer_bf16 = true;
  std::vector<LedgerLine> lines = build_ledger(model_preset("tiny"), f, bf16_trainer);
  EXPECT_DOUBLE_EQ(ledger_line(lines, "train_mfu").ratio, 4.455168e10 / 4e11);
  EXPECT_EQ(ledger_line(lines, "train_mfu").measurement, "bf16 matmul peak the run measured");
  EXPECT_DOUBLE_EQ(ledger_line(lines, "rollout_mfu").ratio, 0.742528);
  LedgerDtypes bf16_rollout;
  bf16_rollout.rollout_bf16 = true;
  lines = build_ledger(model_preset("tiny"), f, bf16_rollout);
  EXPECT_DOUBLE_EQ(ledger_line(lines, "train_mfu").ratio, 0.4455168);
  EXPECT_DOUBLE_EQ(ledger_line(lines, "rollout_mfu").ratio, 0.742528 / 4);
}

TEST(Ledger, NanMeasurementIsNeverARatio) {
  LedgerFigures f;
  f.parameters = std::nan("");
  f.matmul_peak_flops = 0;  // a broken measurement, not a division by zero
  f.train_tokens_per_s = 100;
  const std::vector<LedgerLine> lines = build_ledger(model_preset("tiny"), f);
  expect_not_measured(ledger_line(lines, "parameters").ratio);
  expect_not_measured(ledger_line(lines, "train_mfu").ratio);
  const Json j = ledger_to_json(lines);
  EXPECT_TRUE(j[0]["measured"].is_null());
  EXPECT_TRUE(j[0]["ratio"].is_null());
  EXPECT_EQ(j[0]["formula_value"].get<double>(), 742528.0);
}

TEST(Ledger, TextAndMarkdownShowEveryLine) {
  LedgerFigures f;
  f.parameters = 742528;
  f.engine_kv_bytes_per_token = 2048;
  const ModelConfig w1 = model_preset("tiny");
  const std::vector<LedgerLine> lines = build_ledger(w1, f);
  const std::string text = format_ledger_text(w1, lines);
  const std::string md = format_ledger_markdown(w1, lines);
  for (const LedgerLine& l : lines) {
    EXPECT_NE(text.find(l.quantity), std::string::npos) << l.quantity;
    EXPECT_NE(md.find("| " + l.quantity + " |"), std::string::npos) << l.quantity;
  }
  EXPECT_NE(text.find("V=32 C=128 L=4 Hq=4 Hkv=2 d=32 F=352"), std::string::npos) << text;
  // The KV line: the formula with the numbers put in, its value, and the engine's count.
  const size_t kv = text.find("KV cache per token");
  ASSERT_NE(kv, std::string::npos);
  const std::string kv_line = text.substr(kv, text.find('\n', kv) - kv);
  EXPECT_NE(kv_line.find("2·L·Hkv·d·bytes = 2·4·2·32·4"), std::string::npos) << kv_line;
  const size_t first = kv_line.find("2,048 B");  // the formula's value, then the engine's count
  ASSERT_NE(first, std::string::npos) << kv_line;
  EXPECT_NE(kv_line.find("2,048 B", first + 1), std::string::npos) << kv_line;
  EXPECT_NE(kv_line.find("the rollout engine's own count"), std::string::npos) << kv_line;
  EXPECT_NE(md.find("| 742,528 | counted in the parameter store | 742,528 | measured/formula 1 |"), std::string::npos)
      << md;
  EXPECT_NE(text.find("—"), std::string::npos);  // the unmeasured lines
}

TEST(Ledger, FormatsValuesForPeople) {
  EXPECT_EQ(format_ledger_value(742528, ""), "742,528");
  EXPECT_EQ(format_ledger_value(494032768, ""), "494,032,768");
  EXPECT_EQ(format_ledger_value(2048, "B"), "2,048 B");
  EXPECT_EQ(format_ledger_value(11880448, "B"), "11.9 MB");
  EXPECT_EQ(format_ledger_value(4.455168e10, "FLOP/s"), "44.6 GFLOP/s");
  EXPECT_EQ(format_ledger_value(2.970112e-4, "s"), "297 µs");
  EXPECT_EQ(format_ledger_value(0.0123, "s"), "12.3 ms");
  EXPECT_EQ(format_ledger_value(12345, "/s"), "12.3k/s");
  EXPECT_EQ(format_ledger_value(std::nan(""), "B"), "—");
}

TEST(ProcessMemory, ParsesProcStatus) {
  const ProcessMemory m = parse_proc_status("Name:\trlcpp\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads: 3\n");
  EXPECT_EQ(m.rss_bytes, 102400 * 1024);
  EXPECT_EQ(m.peak_rss_bytes, 204800 * 1024);
  EXPECT_EQ(parse_proc_status("VmRSS: lots\n").rss_bytes, -1);
}

TEST(ProcessMemory, ParsesMemAvailable) {
  EXPECT_EQ(parse_meminfo_available("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20480 kB\n"),
            int64_t{20480} * 1024);
  EXPECT_EQ(parse_meminfo_available("MemTotal: 1 kB\n"), -1);
  EXPECT_GT(available_memory_bytes(), 1 << 20);  // this machine's, read from /proc/meminfo
}

TEST(ProcessMemory, ThisProcessIsResident) {
  const ProcessMemory m = read_process_memory();
  ASSERT_GT(m.rss_bytes, 1 << 20);  // a gtest binary with OpenBLAS holds more than a MiB
  EXPECT_GE(m.peak_rss_bytes, m.rss_bytes);
  const auto metrics = process_memory_metrics();
  EXPECT_GT(metrics.at("memory/rss_bytes"), 0);
  EXPECT_GT(metrics.at("memory/peak_rss_bytes"), 0);
}

TEST(ProcessMemory, PeakResetsPastAFreedBuffer) {
  {
    std::vector<char> big(size_t{96} << 20);
    for (size_t i = 0; i < big.size(); i += 4096) big[i] = 1;  // touch every page so it is resident
    ASSERT_GE(read_process_memory().peak_rss_bytes, int64_t{96} << 20);
    EXPECT_EQ(big[4096], 1);
  }
  // The process's own baseline (libraries, OpenBLAS buffers) differs between builds and machines, so the reset
  // is judged against the peak that includes the freed buffer, not against a fixed size.
  const ProcessMemory freed = read_process_memory();
  ASSERT_GE(freed.peak_rss_bytes, freed.rss_bytes + (int64_t{64} << 20)) << "the freed buffer left no peak";
  if (!reset_peak_rss()) GTEST_SKIP() << "this kernel refuses /proc/self/clear_refs";
  const ProcessMemory after = read_process_memory();
  EXPECT_LT(after.peak_rss_bytes, freed.peak_rss_bytes - (int64_t{64} << 20))
      << "the freed 96 MiB still count as the peak (" << freed.peak_rss_bytes << " B before the reset)";
  EXPECT_GE(after.peak_rss_bytes, after.rss_bytes);
}

TEST(MachinePeaks, MeasuresFiniteYardsticks) {
  const double flops = measure_matmul_flops(128, 96, 64, 3);
  const double bandwidth = measure_copy_bandwidth(int64_t{4} << 20, 3);
  // Any machine that runs this does between 10 MFLOP/s and 1 PFLOP/s, and copies 10 MB/s to 10 TB/s.
  EXPECT_GT(flops, 1e7);
  EXPECT_LT(flops, 1e15);
  EXPECT_GT(bandwidth, 1e7);
  EXPECT_LT(bandwidth, 1e13);
  EXPECT_THROW(measure_matmul_flops(0, 1, 1, 1), Error);
}

}  // namespace
}  // namespace rlcpp
