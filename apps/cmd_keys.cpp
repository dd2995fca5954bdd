// `rlcpp keys PREFIX`: a CURVE key pair for a remote worker or client (core/curve.h, rollout/README.md).
#include <cstdio>
#include <filesystem>

#include "apps/commands.h"
#include "core/curve.h"
#include "core/error.h"

namespace rlcpp::cli {

Command add_keys_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "keys", "write a CURVE key pair: PREFIX.key (secret, mode 0600) and PREFIX.pub; never overwrites");
  auto prefix = std::make_shared<std::string>();
  cmd->add_option("prefix", *prefix, "path prefix of the two files, e.g. keys/worker0")->required();
  return {cmd, [=]() {
    // "some/dir/" would write the hidden files some/dir/.key and some/dir/.pub.
    const std::string name = std::filesystem::path(*prefix).filename().string();
    RLCPP_CHECK(!name.empty() && name != "." && name != "..",
                "keys: '" << *prefix << "' names a directory; give a file prefix such as " << *prefix
                          << (prefix->back() == '/' ? "" : "/") << "worker0");
    const CurveKeys keys = generate_curve_keys();
    save_curve_keys(*prefix, keys);
    std::printf("wrote %s.key (the key pair, mode 0600: keep it here) and %s.pub (public key %s: give it to the "
                "peers)\n",
                prefix->c_str(), prefix->c_str(), keys.public_key.c_str());
    return 0;
  }};
}

}  // namespace rlcpp::cli
