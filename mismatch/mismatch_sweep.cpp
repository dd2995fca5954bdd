#include "mismatch/mismatch_sweep.h"

#include <cctype>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>

#include <sys/un.h>

#include "core/error.h"
#include "core/metrics.h"
#include "loop/controller.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kSweepKeys = {"base", "set", "points", "baseline", "out"};
const std::vector<std::string> kPointKeys = {"name", "source", "set"};
// Names a point cannot take: the sweep's own entries in OUT.
const std::vector<std::string> kReservedNames = {"sft", "plots"};

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// `fn()`, its error prefixed with `where` (the file, and the part of it at fault).
void with_context(const std::string& where, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

void check_known_keys(const Json& j, const std::vector<std::string>& known, const std::string& prefix) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const std::string& k : known) ok = ok || k == it.key();
    RLCPP_CHECK(ok, "unknown config key '" << prefix << it.key() << "' (valid keys here: " << joined(known) << ")");
  }
}

std::string string_at(const Json& j, const std::string& key, const std::string& path) {
  return config_detail::read_leaf<std::string>(j.at(key), path);
}

// The config's first key segment of a dotted path ("rollout" of "rollout.dtype").
std::string first_segment(const std::string& path) { return path.substr(0, path.find('.')); }

// Puts `value` at the dotted `path` of `j`; an object value merges into an object already there.
void merge_into(Json& node, const Json& value) {
  if (value.is_object() && node.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) merge_into(node[it.key()], it.value());
  } else {
    node = value;
  }
}

void set_at_path(Json& j, const std::string& path, const Json& value, const std::string& where) {
  Json* node = &j;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    RLCPP_CHECK(!key.empty(), "config key '" << config_detail::join(where, path) << "' has an empty key segment");
    if (!node->is_object()) *node = Json::object();
    if (dot == std::string::npos) {
      merge_into((*node)[key], value);
      return;
    }
    node = &(*node)[key];
    start = dot + 1;
  }
}

// Keys a set may not give. `where` is the set's key path in the sweep file ("set", "points[2].set", "--set").
void check_allowed(const std::string& key, const std::string& where, bool point) {
  const std::string top = first_segment(key);
  RLCPP_CHECK(top != "run_dir", "config key '" << config_detail::join(where, key)
                                               << "': the sweep runs point P in OUT/P; give the sweep's directory "
                                               << "as \"out\" or --out");
  RLCPP_CHECK(!point || (top != "warm_start" && top != "init_checkpoint"),
              "config key '" << config_detail::join(where, key) << "': the points share one starting policy; set "
                             << top << " in the sweep's \"set\" instead");
}

void apply_set(Json& j, const Json& set, const std::string& where, bool point) {
  RLCPP_CHECK(set.is_object(), "config key '" << (where.empty() ? "set" : where)
                                              << "': expected an object of {\"key.path\": value}, got "
                                              << set.dump());
  for (auto it = set.begin(); it != set.end(); ++it) {
    check_allowed(it.key(), where, point);
    set_at_path(j, it.key(), it.value(), where);
  }
}

// Unknown keys and wrong types of a (partial) train config.
void check_train_keys(const Json& j) {
  TrainConfig cfg;
  config_from_json(j, cfg);
}

void check_point_name(const std::string& name, const std::string& path) {
  RLCPP_CHECK(!name.empty() && name[0] != '.', "config key '" << path << "': \"" << name
                                                              << "\" cannot name a run directory");
  for (char c : name)
    RLCPP_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.',
                "config key '" << path << "': \"" << name << "\" names a run directory, so it may hold only "
                               << "letters, digits, '_', '-' and '.'");
  for (const std::string& reserved : kReservedNames)
    RLCPP_CHECK(name != reserved, "config key '" << path << "': \"" << name << "\" is taken by the sweep's own "
                                                 << "OUT/" << reserved << " (reserved: " << joined(kReservedNames)
                                                 << ")");
}

std::string default_source(const Json& set) {
  if (set.empty()) return "baseline";
  std::vector<std::string> keys;
  for (auto it = set.begin(); it != set.end(); ++it) keys.push_back(it.key());
  return joined(keys);
}

// "rollout.dtype=bf16, algorithm.policy_loss.rollout_correction.is=token" for progress lines.
std::string describe_set(const Json& set) {
  if (set.empty()) return "no overrides";
  std::string out;
  for (auto it = set.begin(); it != set.end(); ++it)
    out += (out.empty() ? "" : ", ") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  return out;
}

std::string eta_text(double seconds_done, size_t done, size_t total) {
  if (done == 0) return "—";
  return format_duration(seconds_done / static_cast<double>(done) * static_cast<double>(total - done));
}

Json sweep_record(const MismatchSweep& sweep, const SweepResult& result) {
  Json points = Json::array();
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const SweepPoint& p = sweep.points[i];
    Json entry = {{"name", p.name}, {"source", p.source}, {"set", p.set}, {"steps", p.config.steps}};
    if (i < result.points.size()) {
      const SweepPointResult& r = result.points[i];
      entry["run_dir"] = r.run_dir;
      entry["seconds"] = r.seconds;
      entry["status"] = r.error.empty() ? "done" : "failed";
      if (!r.error.empty()) entry["error"] = r.error;
    } else {
      entry["status"] = "pending";
    }
    points.push_back(entry);
  }
  Json j = {{"sweep_file", sweep.file},       {"base", sweep.base},
            {"baseline", sweep.baseline},     {"shared_warm_start", sweep.shared_warm_start},
            {"start_checkpoint", result.start_checkpoint}, {"seconds", result.seconds},
            {"points", points}};
  if (sweep.shared_warm_start) j["warm_start"] = config_to_json(sweep.warm_start_sft);
  return j;
}

// A split run's workers listen on ipc://RUN_DIR/worker<i>[_weights].ipc (loop/rollout_backend.cpp, RUN_DIR made
// absolute); a Unix socket path holds at most sizeof(sun_path) - 1 bytes, and a longer one only shows as workers
// that never start listening. Checked for every point before anything runs.
void check_socket_paths(const MismatchSweep& sweep, const std::string& out_dir) {
  const size_t limit = sizeof(sockaddr_un{}.sun_path) - 1;
  for (const SweepPoint& p : sweep.points) {
    if (p.config.rollout.placement != "split") continue;
    const std::string longest = fs::absolute(fs::path(out_dir) / p.name).string() + "/worker" +
                                std::to_string(p.config.rollout.num_workers - 1) + "_weights.ipc";
    RLCPP_CHECK(longest.size() <= limit,
                "mismatch: point " << p.name << "'s split workers would listen on ipc://" << longest << " ("
                                   << longest.size() << " bytes), longer than the " << limit
                                   << " bytes a Unix socket path holds; give a shorter --out (or \"out\")");
  }
}

}  // namespace

MismatchSweep load_mismatch_sweep(const std::string& path, const SweepOverrides& overrides) {
  MismatchSweep sweep;
  sweep.file = path;
  const Json file = load_json_file(path);
  Json common;
  with_context(path, [&] {
    RLCPP_CHECK(file.is_object(), "config key '<root>': expected an object, got " << file.dump());
    check_known_keys(file, kSweepKeys, "");
    RLCPP_CHECK(file.contains("base"), "config key 'base' is missing: give a train config file (relative to "
                                       "the sweep file's folder) or an inline train config object");
    RLCPP_CHECK(file.contains("points"), "config key 'points' is missing: give a list of {\"name\", \"set\"}");
    sweep.out = file.contains("out") ? string_at(file, "out", "out") : "runs/mismatch";
  });

  const Json& base = file["base"];
  if (base.is_string()) {
    fs::path base_path = base.get<std::string>();
    if (base_path.is_relative()) base_path = fs::path(path).parent_path() / base_path;
    sweep.base = base_path.lexically_normal().string();
    RLCPP_CHECK(fs::exists(base_path), path << ": config key 'base': " << sweep.base << " does not exist");
    common = load_json_file(sweep.base);
    with_context(sweep.base + " (the base of " + path + ")", [&] { check_train_keys(common); });
  } else {
    RLCPP_CHECK(base.is_object(), path << ": config key 'base': expected a train config file name or object, got "
                                       << base.dump());
    sweep.base = "inline";
    common = base;
    with_context(path + ": base", [&] { check_train_keys(common); });
  }

  if (file.contains("set"))
    with_context(path, [&] {
      apply_set(common, file["set"], "set", /*point=*/false);
      with_context("set", [&] { check_train_keys(common); });
    });
  for (const std::string& o : overrides.set)
    with_context("--set " + o, [&] {
      check_allowed(o.substr(0, o.find('=')), "", /*point=*/false);
      apply_override(common, o);
      check_train_keys(common);
    });
  if (overrides.steps > 0) common["steps"] = overrides.steps;
  if (!overrides.out.empty()) sweep.out = overrides.out;

  TrainConfig common_cfg;
  with_context(path, [&] { config_from_json(common, common_cfg); });
  sweep.shared_warm_start = common_cfg.warm_start.enabled && common_cfg.init_checkpoint.empty();
  if (sweep.shared_warm_start) {
    sweep.warm_start_sft = common_cfg.warm_start.sft;
    with_context(path + ": warm_start.sft", [&] { sweep.warm_start_sft.validate(); });
  }

  const Json& points = file["points"];
  RLCPP_CHECK(points.is_array() && !points.empty(),
              path << ": config key 'points': expected a non-empty list of {\"name\", \"set\"}, got " << points.dump());
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string at = "points[" + std::to_string(i) + "]";
    const Json& pj = points[i];
    SweepPoint p;
    with_context(path, [&] {
      RLCPP_CHECK(pj.is_object(), "config key '" << at << "': expected an object, got " << pj.dump());
      check_known_keys(pj, kPointKeys, at + ".");
      RLCPP_CHECK(pj.contains("name"), "config key '" << at << ".name' is missing");
      p.name = string_at(pj, "name", at + ".name");
      check_point_name(p.name, at + ".name");
      for (const SweepPoint& q : sweep.points)
        RLCPP_CHECK(q.name != p.name, "config key '" << at << ".name': \"" << p.name << "\" names two points");
      p.set = pj.contains("set") ? pj["set"] : Json::object();
      RLCPP_CHECK(p.set.is_object(), "config key '" << at << ".set': expected an object of {\"key.path\": value}, "
                                                    << "got " << p.set.dump());
      p.source = pj.contains("source") ? string_at(pj, "source", at + ".source") : default_source(p.set);
    });
    Json j = common;
    const std::string where = path + ": " + at + " (\"" + p.name + "\")";
    with_context(where + ".set", [&] {
      apply_set(j, p.set, "", /*point=*/true);
      check_train_keys(j);
    });
    with_context(where, [&] {
      j["warm_start"]["enabled"] = false;  // the shared start is given as init_checkpoint when the point runs
      j["run_dir"] = (fs::path(sweep.out) / p.name).string();
      config_from_json(j, p.config);
      p.config.validate();
    });
    sweep.points.push_back(std::move(p));
  }

  if (file.contains("baseline")) {
    with_context(path, [&] {
      sweep.baseline = string_at(file, "baseline", "baseline");
      bool found = false;
      std::vector<std::string> names;
      for (const SweepPoint& p : sweep.points) {
        found = found || p.name == sweep.baseline;
        names.push_back(p.name);
      }
      RLCPP_CHECK(found, "config key 'baseline': \"" << sweep.baseline << "\" is not a point (points: "
                                                     << joined(names) << ")");
    });
  } else {
    for (const SweepPoint& p : sweep.points)
      if (p.set.empty()) {
        sweep.baseline = p.name;
        break;
      }
  }
  return sweep;
}

std::string fresh_sweep_dir(const std::string& out) {
  RLCPP_CHECK(!out.empty(), "mismatch: empty output directory");
  std::string chosen = out;
  for (int i = 2; fs::exists(fs::path(chosen) / "sweep.json"); ++i) chosen = out + "-" + std::to_string(i);
  return chosen;
}

SweepResult run_mismatch_sweep(const MismatchSweep& sweep) {
  Stopwatch wall;
  SweepResult result;
  result.sweep_file = sweep.file;
  result.base = sweep.base;
  result.baseline = sweep.baseline;
  result.out_dir = fresh_sweep_dir(sweep.out);
  check_socket_paths(sweep, result.out_dir);
  const fs::path out(result.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  RLCPP_CHECK(!ec, "mismatch: cannot create " << out.string() << ": " << ec.message());
  const std::string record_path = (out / "sweep.json").string();
  write_json_file_atomic(record_path, sweep_record(sweep, result));  // claims the directory at once

  const size_t n = sweep.points.size();
  std::printf("mismatch: %zu points from %s (base %s), sweep directory %s\n", n, sweep.file.c_str(),
              sweep.base.c_str(), result.out_dir.c_str());
  std::fflush(stdout);

  if (sweep.shared_warm_start) {
    SftConfig sft = sweep.warm_start_sft;
    sft.run_dir = (out / "sft").string();
    std::printf("mismatch: shared SFT warm start, %lld steps, in %s\n", static_cast<long long>(sft.steps),
                sft.run_dir.c_str());
    std::fflush(stdout);
    Stopwatch t;
    const SftSummary s = run_sft(sft, config_to_json(sft));
    result.start_checkpoint = s.checkpoint;
    result.warm_start_accuracy = s.final_accuracy;
    result.warm_start_seconds = t.seconds();
  } else {
    result.start_checkpoint = sweep.points.front().config.init_checkpoint;
  }

  const double points_start = wall.seconds();
  for (size_t i = 0; i < n; ++i) {
    const SweepPoint& p = sweep.points[i];
    const double done_s = wall.seconds() - points_start;
    std::printf("mismatch: point %zu/%zu %s [%s: %s], %lld steps | elapsed %s | ETA %s\n", i + 1, n,
                p.name.c_str(), p.source.c_str(), describe_set(p.set).c_str(),
                static_cast<long long>(p.config.steps), format_duration(wall.seconds()).c_str(),
                eta_text(done_s, i, n).c_str());
    std::fflush(stdout);

    TrainConfig cfg = p.config;
    cfg.run_dir = (out / p.name).string();
    if (!result.start_checkpoint.empty()) cfg.init_checkpoint = result.start_checkpoint;
    SweepPointResult r{p.name, p.source, p.set, p.config.steps, "", "", 0};
    Stopwatch t;
    try {
      r.run_dir = run_train(cfg, config_to_json(cfg)).run_dir;
    } catch (const std::exception& e) {
      r.error = e.what();
      if (fs::exists(fs::path(cfg.run_dir) / "metrics.jsonl")) r.run_dir = cfg.run_dir;
    }
    r.seconds = t.seconds();
    result.points.push_back(r);
    result.seconds = wall.seconds();
    write_json_file_atomic(record_path, sweep_record(sweep, result));

    const double points_s = wall.seconds() - points_start;
    if (r.error.empty())
      std::printf("mismatch: point %zu/%zu %s done in %s (%s) | elapsed %s | ETA %s\n", i + 1, n, p.name.c_str(),
                  format_duration(r.seconds).c_str(), r.run_dir.c_str(), format_duration(wall.seconds()).c_str(),
                  eta_text(points_s, i + 1, n).c_str());
    else
      std::printf("mismatch: point %zu/%zu %s FAILED after %s: %s | elapsed %s | ETA %s\n", i + 1, n,
                  p.name.c_str(), format_duration(r.seconds).c_str(), r.error.c_str(),
                  format_duration(wall.seconds()).c_str(), eta_text(points_s, i + 1, n).c_str());
    std::fflush(stdout);
  }
  result.seconds = wall.seconds();
  write_json_file_atomic(record_path, sweep_record(sweep, result));
  return result;
}

}  // namespace rlcpp
