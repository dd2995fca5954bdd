// ZeroMQ endpoints as rlcpp's config keys and options give them (transport://address): parsed once, so that a
// malformed one, a port that is no port, or two spellings of one place are refused by name before any socket is
// made (libzmq takes "tcp://host:99999" as port 99999 mod 2^16, and a connect to a bad address only times out).
#pragma once

#include <string>

namespace rlcpp {

struct Endpoint {
  std::string transport;  // "tcp", "ipc" or "inproc"
  std::string host;       // tcp: where it goes (after a connect's "SOURCE;"), as written
  std::string port;       // tcp: as written; "*" or "0" is a bind's "any port"
  std::string address;    // ipc, inproc: what follows "://"
  bool local = false;     // stays on this machine: ipc, inproc, tcp on a loopback address (127.x, localhost, [::1])

  // One spelling per place, to find an endpoint listed twice: every loopback name of tcp as one host
  // (127.0.0.1, localhost, [::1]), a host in lower case, the port without leading zeros, an ipc path made
  // lexically normal. Names that DNS resolves to one address are not looked up.
  std::string place() const;
};

enum class EndpointUse {
  kBind,     // listened at: a tcp port may be "*" or "0" (any)
  kConnect,  // connected to: a tcp port must be one, 1..65535
};

// Throws naming the endpoint when it is not transport://address, its transport is not tcp, ipc or inproc, or a
// tcp port is not 1..65535 (nor "*"/"0" for a bind).
Endpoint parse_endpoint(const std::string& endpoint, EndpointUse use = EndpointUse::kBind);

// parse_endpoint(endpoint).local; which endpoints need CURVE: core/curve.h.
bool is_local_endpoint(const std::string& endpoint);

}  // namespace rlcpp
