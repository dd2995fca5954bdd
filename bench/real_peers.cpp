#include "bench/real_peers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "bench/bench_common.h"
#include "core/error.h"

namespace rlcpp::bench {

namespace {

struct PeerSpec {
  std::string venv;    // under peers_dir(); "" = the machine's python3 ($RLCPP_PEER_PYTHON), e.g. a GPU machine's
  std::string script;  // under bench/peers/
};

const std::map<std::string, PeerSpec>& peer_specs() {
  static const std::map<std::string, PeerSpec> specs = {
      {"pytorch2", {"venv", "torch2_train.py"}},
      {"trl", {"venv", "trl_grpo.py"}},
      {"llama.cpp", {"venv", "llamacpp_rollout.py"}},
      {"vllm", {"vllm-venv", "vllm_rollout.py"}},
      {"hf", {"", "hf_generate.py"}},
      {"hf-pytorch", {"", "hf_grpo_step.py"}},  // Hugging Face generate + a PyTorch update, a GRPO step
      {"pytorch-gpu", {"", "torch2_train.py"}},  // the GPU machine's own PyTorch, training there
  };
  return specs;
}

std::string last_lines(const std::string& text, int n) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  size_t start = end;
  for (int i = 0; i < n && start > 0; ++i) {
    start = text.rfind('\n', start - 1);
    if (start == std::string::npos) {
      start = 0;
      break;
    }
  }
  std::string out = text.substr(start, end - start);
  while (!out.empty() && out.front() == '\n') out.erase(0, 1);
  for (char& c : out)
    if (c == '\n') c = ' ';
  return out;
}

std::string format_value(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.1f", v);
  return buf;
}

}  // namespace

std::string peers_dir() {
  const char* env = std::getenv("RLCPP_PEERS_DIR");
  return env ? env : source_dir() + "/build/peers";
}

PeerRun run_real_peer(const std::string& peer, const std::string& args) {
  const auto spec = peer_specs().find(peer);
  RLCPP_CHECK(spec != peer_specs().end(), "bench: no peer named '" << peer << "'");
  PeerRun run;
  run.peer = peer;
  const std::string venv = peers_dir() + "/" + spec->second.venv;
  const char* system_python = std::getenv("RLCPP_PEER_PYTHON");
  const std::string python = spec->second.venv.empty() ? (system_python ? system_python : "python3")
                                                       : venv + "/bin/python";
  if (!spec->second.venv.empty() && (!std::filesystem::exists(venv + "/.done") || !std::filesystem::exists(python))) {
    run.skipped = "not installed (" + venv + " is missing or unfinished: run scripts/install_peers.sh)";
    return run;
  }
  const std::string script = source_dir() + "/bench/peers/" + spec->second.script;
  TempDir dir("peer");
  const std::string err_file = dir.path() + "/stderr";
  // The peer's progress goes to stderr, which is kept (its last lines are the reason when it fails) and shown.
  const std::string cmd = peer_environment() + "'" + python + "' '" + script + "' " + args + " 2>'" + err_file + "'";
  std::fprintf(stderr, "bench: running the %s peer: %s\n", peer.c_str(), (script + " " + args).c_str());
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  RLCPP_CHECK(pipe, "bench: cannot run " << cmd);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
  const int status = pclose(pipe.release());
  std::ifstream in(err_file);
  std::stringstream err;
  err << in.rdbuf();
  const size_t line = out.rfind("\n{", out.size() >= 2 ? out.size() - 2 : 0);
  const std::string last = line == std::string::npos ? out : out.substr(line + 1);
  try {
    if (!last.empty() && last.front() == '{') run.result = Json::parse(last);
  } catch (const Json::parse_error&) {
  }
  if (run.result.is_null()) {
    const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                              : "ended by signal " + std::to_string(WTERMSIG(status));
    run.skipped = "failed (" + how + "): " + last_lines(err.str(), 3);
  }
  return run;
}

bool list_has(const std::string& list, const std::string& name) {
  std::stringstream s(list);
  for (std::string item; std::getline(s, item, ',');)
    if (item == name) return true;
  return false;
}

std::vector<std::string> real_peers_in(const std::string& list, const std::vector<std::string>& allowed) {
  std::vector<std::string> out;
  std::stringstream s(list);
  for (std::string item; std::getline(s, item, ',');) {
    if (item.empty() || item == "torch") continue;
    bool ok = false;
    for (const std::string& a : allowed) ok = ok || a == item;
    if (!ok) {
      std::string choices = "torch";
      for (const std::string& a : allowed) choices += ", " + a;
      RLCPP_FAIL("bench --peers: '" << item << "' is not a peer of this bench (choices: " << choices << ")");
    }
    out.push_back(item);
  }
  return out;
}

PeerFigure peer_figure(const PeerRun& run, const std::string& key) {
  PeerFigure f;
  f.name = run.peer;
  if (run.result.is_null()) {
    f.note = run.skipped.empty() ? "did not run" : run.skipped;
    return f;
  }
  const Json& r = run.result;
  for (const char* version_key : {"vllm", "llama_cpp_python", "trl", "torch"})
    if (r.contains(version_key) && r[version_key].is_string()) {
      f.name += ' ';
      f.name += r[version_key].get<std::string>();
      break;
    }
  std::vector<std::string> details;
  if (r.contains("dtype") && r["dtype"].is_string()) details.push_back(r["dtype"].get<std::string>());
  // The value at the dotted key; a mode's own thread count wins over the run's.
  const Json* node = &r;
  const Json* parent = nullptr;
  std::stringstream path(key);
  for (std::string part; std::getline(path, part, '.');) {
    if (!node->is_object() || !node->contains(part)) {
      f.note = "no '" + key + "' in its result";
      if (node->is_object() && node->contains("error") && (*node)["error"].is_string())
        f.note = "failed: " + (*node)["error"].get<std::string>();
      return f;
    }
    parent = node;
    node = &(*node)[part];
  }
  if (!node->is_number() || !(node->get<double>() > 0) || !std::isfinite(node->get<double>())) {
    f.note = "'" + key + "' is not a positive number";
    return f;
  }
  const Json* threads = parent && parent->contains("threads") ? &(*parent)["threads"]
                        : r.contains("threads")                ? &r["threads"]
                                                               : nullptr;
  if (threads) details.push_back(threads->dump() + " threads");
  if (!details.empty()) {
    f.name += " (";
    for (size_t i = 0; i < details.size(); ++i) f.name += (i ? ", " : "") + details[i];
    f.name += ")";
  }
  f.value = node->get<double>();
  return f;
}

std::vector<std::string> comparison_rows(const std::string& rlcpp_name, double rlcpp_value,
                                         const std::vector<PeerFigure>& peers, const std::string& unit,
                                         bool higher_is_better) {
  std::vector<std::string> rows;
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-56s %12s %s", rlcpp_name.c_str(), format_value(rlcpp_value).c_str(),
                unit.c_str());
  rows.push_back(buf);
  for (const PeerFigure& p : peers) {
    if (!p.measured()) {
      std::snprintf(buf, sizeof buf, "  %-56s did not run: %s", p.name.c_str(), p.note.c_str());
    } else {
      const double ratio = higher_is_better ? rlcpp_value / p.value : p.value / rlcpp_value;
      std::snprintf(buf, sizeof buf, "  %-56s %12s %s   rlcpp %.2fx%s%s", p.name.c_str(),
                    format_value(p.value).c_str(), unit.c_str(), ratio, p.note.empty() ? "" : "  ", p.note.c_str());
    }
    rows.push_back(buf);
  }
  return rows;
}

}  // namespace rlcpp::bench
