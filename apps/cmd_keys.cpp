// `rlcpp keys PREFIX`: a CURVE key pair for a remote worker or client (core/curve.h, rollout/README.md).
#include <cstdio>

#include "apps/commands.h"
#include "core/curve.h"

namespace rlcpp::cli {

Command add_keys_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "keys", "write a CURVE key pair: PREFIX.key (secret, mode 0600) and PREFIX.pub; never overwrites");
  auto prefix = std::make_shared<std::string>();
  cmd->add_option("prefix", *prefix, "path prefix of the two files, e.g. keys/worker0")->required();
  return {cmd, [=]() {
    const CurveKeys keys = generate_curve_keys();
    save_curve_keys(*prefix, keys);
    std::printf("wrote %s.key (the key pair, mode 0600: keep it here) and %s.pub (public key %s: give it to the "
                "peers)\n",
                prefix->c_str(), prefix->c_str(), keys.public_key.c_str());
    return 0;
  }};
}

}  // namespace rlcpp::cli
