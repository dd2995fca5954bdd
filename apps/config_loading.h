// Reading a run config: JSON file, then --set overrides, then the typed struct (unknown keys and wrong types
// fail with the key path), then the resolved JSON that is saved with the run.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp::cli {

template <class C> Json load_run_config(const std::string& path, const std::vector<std::string>& overrides, C& cfg) {
  Json j = load_json_file(path);
  for (const auto& o : overrides) apply_override(j, o);
  try {
    config_from_json(j, cfg);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  return config_to_json(cfg);
}

}  // namespace rlcpp::cli
