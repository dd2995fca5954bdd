#include "bench/tokenizer_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "tokenizer/bpe_tokenizer.h"

namespace rlcpp::bench {

namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) { return read_input_file(path, kDatasetInput.named("a text file")); }

// English prose and Markdown (the READMEs and docs), the multilingual test corpus, and C++: ~0.5 MB.
std::string default_text(const std::string& src) {
  std::string text;
  for (const char* dir : {"", "/docs", "/loop", "/reward", "/bench"})
    for (const auto& e : fs::directory_iterator(src + dir))
      if (e.path().extension() == ".md") text += read_all(e.path().string()) + "\n";
  text += read_all(src + "/tests/data/tokenizer_corpus.jsonl");
  for (const char* dir : {"/core", "/rollout"})
    for (const auto& e : fs::directory_iterator(src + dir))
      if (e.path().extension() == ".cpp") text += read_all(e.path().string()) + "\n";
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (true) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

}  // namespace

int run_tokenizer_bench(const TokenizerBenchOptions& o) {
  const std::string path =
      fs::is_directory(o.tokenizer) ? (fs::path(o.tokenizer) / "tokenizer.json").string() : o.tokenizer;
  const BpeTokenizer tok = BpeTokenizer::load(path);
  const std::string src = source_dir();
  std::string text;
  std::vector<std::string> per_input;  // each input's counts, printed under the header
  for (const std::string& input : o.inputs) {
    std::string part = read_all(input);
    if (!part.empty() && part.back() != '\n') part += '\n';
    int64_t part_bytes = 0, part_chars = 0, part_tokens = 0, part_lines = 0;
    for (const std::string& line : split_lines(part)) {
      if (line.empty()) continue;
      ++part_lines;
      part_bytes += static_cast<int64_t>(line.size());
      for (unsigned char c : line) part_chars += (c & 0xC0) != 0x80;  // UTF-8 code points
      part_tokens += static_cast<int64_t>(tok.encode(line).size());
    }
    char row[512];
    std::snprintf(row, sizeof row, "  %s: %lld lines, %lld characters, %lld tokens: %.2f characters/token, "
                  "%.2f bytes/token", input.c_str(), static_cast<long long>(part_lines),
                  static_cast<long long>(part_chars), static_cast<long long>(part_tokens),
                  static_cast<double>(part_chars) / static_cast<double>(std::max<int64_t>(1, part_tokens)),
                  static_cast<double>(part_bytes) / static_cast<double>(std::max<int64_t>(1, part_tokens)));
    per_input.push_back(row);
    text += part;
  }
  if (o.inputs.empty()) text = default_text(src);
  const std::vector<std::string> lines = split_lines(text);
  // The peer reads the same lines from a file: the one input, or the text assembled here.
  const bool own_file = o.inputs.size() != 1;
  const std::string text_file =
      own_file ? (fs::temp_directory_path() / ("rlcpp_tokenize_bench_" + std::to_string(getpid()) + ".txt")).string()
               : o.inputs[0];
  if (own_file) {
    OutputFile file(text_file, OutputFile::Mode::kReplace);
    file.write(text);
    file.close();
  }
  int64_t bytes = 0, tokens = 0;
  for (const std::string& line : lines) {  // warm-up, as the peer's
    bytes += static_cast<int64_t>(line.size());
    tokens += static_cast<int64_t>(tok.encode(line).size());
  }
  const double seconds = median_seconds(
      [&] {
        for (const std::string& line : lines) (void)tok.encode(line);
      },
      0, o.iters);
  const double mb_per_s = static_cast<double>(bytes) / seconds / 1e6;
  // The whole text in one call: what the peer does without its per-call cost.
  const std::vector<int32_t> whole_ids = tok.encode(text);
  const double whole_seconds = median_seconds([&] { (void)tok.encode(text); }, 0, o.iters);
  const double whole_mb_per_s = static_cast<double>(text.size()) / whole_seconds / 1e6;
  std::printf("bench tokenize: %s, %zu lines, %.2f MB, %lld tokens (%.2f bytes/token), one thread, median of %d\n",
              path.c_str(), lines.size(), bytes / 1e6, static_cast<long long>(tokens),
              static_cast<double>(bytes) / static_cast<double>(tokens), o.iters);
  for (const std::string& row : per_input) std::printf("%s\n", row.c_str());
  std::printf("  rlcpp  %8.2f MB/s  %10.0f tokens/s by line; %8.2f MB/s in one call\n", mb_per_s,
              static_cast<double>(tokens) / seconds, whole_mb_per_s);
  if (o.peer) {
    const std::string python = src + "/.venv/bin/python";
    const Json peer = run_python_peer(python, src + "/bench/peers/tokenizers_peer.py",
                                      "'" + path + "' '" + text_file + "' " + std::to_string(o.iters));
    if (!peer.is_null()) {
      const double peer_mb = peer["mb_per_s"].get<double>();
      const double peer_whole_mb = peer["whole_mb_per_s"].get<double>();
      std::printf("  peer   %8.2f MB/s  %10.0f tokens/s by line; %8.2f MB/s in one call  (%s)\n", peer_mb,
                  peer["tokens"].get<double>() / peer["seconds"].get<double>(), peer_whole_mb,
                  peer["library"].get<std::string>().c_str());
      const bool same = peer["tokens"].get<int64_t>() == tokens &&
                        peer["whole_tokens"].get<int64_t>() == static_cast<int64_t>(whole_ids.size());
      std::printf("  ratio  %.2fx the peer's MB/s by line, %.2fx in one call%s\n", mb_per_s / peer_mb,
                  whole_mb_per_s / peer_whole_mb, same ? "" : "  (token counts differ: the ids are not the same)");
    } else {
      std::printf("  peer   not run: %s missing? (scripts/ensure_python.sh installs it)\n", python.c_str());
    }
  }
  if (own_file) fs::remove(text_file);
  return 0;
}

}  // namespace rlcpp::bench
