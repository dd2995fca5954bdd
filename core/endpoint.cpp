#include "core/endpoint.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.h"

namespace rlcpp {

namespace {

bool is_loopback_host(const std::string& host) {
  // 127.x as an IPv4 literal only: a name such as 127.example.com may resolve anywhere.
  const bool ipv4_loopback = host.rfind("127.", 0) == 0 && host.find_first_not_of("0123456789.") == std::string::npos;
  return host == "localhost" || host == "[::1]" || host == "::1" || ipv4_loopback;
}

}  // namespace

Endpoint parse_endpoint(const std::string& endpoint, EndpointUse use) {
  const auto sep = endpoint.find("://");
  RLCPP_CHECK(sep != std::string::npos && sep > 0,
              "endpoint '" << endpoint << "' is not of the form transport://address (e.g. ipc:///tmp/w.ipc, "
                           << "tcp://127.0.0.1:5555)");
  Endpoint e;
  e.transport = endpoint.substr(0, sep);
  e.address = endpoint.substr(sep + 3);
  if (e.transport == "ipc" || e.transport == "inproc") {
    RLCPP_CHECK(!e.address.empty(), "endpoint '" << endpoint << "' names no address after '" << e.transport << "://'");
    e.local = true;
    return e;
  }
  RLCPP_CHECK(e.transport == "tcp", "endpoint '" << endpoint << "': transport '" << e.transport
                                                 << "' is not supported; use ipc://, inproc:// or tcp://");
  // A connect may name a source first ("tcp://SRC;DST:PORT"): where it goes is what follows the last ';'.
  const size_t semicolon = e.address.rfind(';');
  const std::string target = semicolon == std::string::npos ? e.address : e.address.substr(semicolon + 1);
  const size_t colon = target.rfind(':');
  e.host = target.substr(0, colon);
  e.port = colon == std::string::npos ? "" : target.substr(colon + 1);
  const bool any_port = e.port == "*" || (!e.port.empty() && e.port.find_first_not_of('0') == std::string::npos);
  const bool number =
      !e.port.empty() && e.port.size() <= 5 && e.port.find_first_not_of("0123456789") == std::string::npos;
  if (use == EndpointUse::kConnect)
    RLCPP_CHECK(number && !any_port && std::stol(e.port) <= 65535,
                "endpoint '" << endpoint << "': port '" << e.port << "' is not a port to connect to (1..65535)");
  else
    RLCPP_CHECK(any_port || (number && std::stol(e.port) <= 65535),
                "endpoint '" << endpoint << "': port '" << e.port << "' is not a port (1..65535, or * for any)");
  RLCPP_CHECK(!e.host.empty(), "endpoint '" << endpoint << "' names no host before the port");
  e.local = is_loopback_host(e.host);
  return e;
}

std::string Endpoint::place() const {
  if (transport != "tcp") {
    const std::string path = transport == "ipc" ? std::filesystem::path(address).lexically_normal().string() : address;
    return transport + "://" + path;
  }
  std::string h = host;
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (is_loopback_host(h)) h = "loopback";
  const std::string p = port == "*" ? port : std::to_string(std::stol(port));
  return "tcp://" + h + ":" + p;
}

bool is_local_endpoint(const std::string& endpoint) { return parse_endpoint(endpoint).local; }

}  // namespace rlcpp
