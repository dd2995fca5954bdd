// ZeroMQ CURVE for endpoints that reach other hosts: key files (`rlcpp keys`), the socket setup of both sides,
// the ZAP handler that admits only listed client keys, and the policy that decides when CURVE is needed.
//
// Policy (secure_bind / secure_connect, the one place it is decided): ipc://, inproc:// and tcp:// on a loopback
// address stay plain by default; a tcp endpoint that reaches beyond this machine is refused unless CURVE keys
// are configured. With keys configured every ipc and tcp socket uses CURVE (inproc has no handshake).
// The side that binds is the CURVE server (it admits only the client public keys it was given, through a ZAP
// handler); the side that connects is the CURVE client (it knows the server's public key). A peer without the
// right keys never gets a message through: the server refuses its handshake and it gets no reply.
//
// Key files, written by `rlcpp keys PREFIX`:
//   PREFIX.key  mode 0600, "public-key = Z85" and "secret-key = Z85" lines (the pair; keep it on this machine)
//   PREFIX.pub  "public-key = Z85" (give it to the peers that must admit or reach this one)
// Z85 keys are 40 characters (32 bytes); lines starting with '#' are comments.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace rlcpp {

constexpr size_t kCurveKeyChars = 40;  // z85 of 32 bytes

struct CurveKeys {
  std::string public_key;  // z85
  std::string secret_key;  // z85
};

// Whether this libzmq was built with CURVE (zmq_has("curve")).
bool curve_supported();
// A fresh key pair (zmq_curve_keypair).
CurveKeys generate_curve_keys();
// Writes PREFIX.key (the pair, mode 0600) and PREFIX.pub (the public key). Refuses, naming the file, when either
// exists already: nothing saved is overwritten.
void save_curve_keys(const std::string& prefix, const CurveKeys& keys);
// A key pair from a .key file. Refused, naming the file: missing, readable or writable by group or others (like
// ssh), a key not 40 z85 characters, a public key that does not belong to the secret key.
CurveKeys load_curve_key_file(const std::string& path);
// The public key of a .pub file. Refused, naming the file: missing, no public-key line, a bad key, or a secret key
// in it (a .key file handed out in place of its .pub).
std::string load_curve_public_key(const std::string& path);
// Throws naming `what` unless `key` is a 40-character z85 key.
void check_curve_key(const std::string& key, const std::string& what);

// Answers ZAP 1.0 requests (RFC 27) of one ZeroMQ context on inproc://zeromq.zap.01, on its own thread: a CURVE
// handshake on a socket of a domain it gave out passes (200) only when the client's public key is one that
// domain admits, else "400". One per context (a second is refused); destroy it before the context and after the
// sockets it guards (without a handler, libzmq would let any client with the server's public key in).
class ZapHandler {
 public:
  explicit ZapHandler(zmq::context_t& context);
  ~ZapHandler();  // stops the thread and joins it; never waits on a peer
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // A new ZAP domain that admits exactly these z85 client public keys; set on a server socket (make_curve_server).
  std::string add_domain(const std::vector<std::string>& client_publics);
  void* context_handle() const { return context_; }
  int64_t admitted() const { return admitted_.load(); }
  int64_t refused() const { return refused_.load(); }

 private:
  void run();
  // The reply frames to one request (status "200" or "400").
  std::vector<std::string> answer(const std::vector<zmq::message_t>& request);

  void* context_;
  zmq::socket_t socket_;  // REP on inproc://zeromq.zap.01, used by the thread only once it runs
  int wake_fd_ = -1;      // eventfd: readable = stop
  std::mutex mutex_;
  std::map<std::string, std::set<std::string>> domains_;  // domain -> admitted z85 public keys
  std::atomic<int64_t> admitted_{0}, refused_{0};
  std::thread thread_;
};

// A socket that will bind as a CURVE server with `keys`, admitting only `allowed_client_publics` (through `zap`,
// the handler of the socket's context).
void make_curve_server(zmq::socket_t& socket, const CurveKeys& keys,
                       const std::vector<std::string>& allowed_client_publics, ZapHandler& zap);
// A socket that will connect as a CURVE client with its own `own_keys` to a server whose public key is
// `server_public`.
void make_curve_client(zmq::socket_t& socket, const CurveKeys& own_keys, const std::string& server_public);

// What one process uses on its sockets (`--curve-key`, `--curve-clients`, `--curve-server`). No keys = plain,
// which only local endpoints allow.
struct CurveOptions {
  CurveKeys keys;                    // this process's pair
  std::vector<std::string> clients;  // public keys admitted by the sockets it binds
  std::string server_public;         // public key of the server its sockets connect to
  ZapHandler* zap = nullptr;         // the ZAP handler of the context its bound sockets belong to
  bool configured() const { return !keys.secret_key.empty(); }
};

// The policy above, for a socket about to bind (or connect to) `endpoint`: makes it a CURVE server (client) when
// CURVE applies and returns true; returns false for a plain one. Throws, naming `who` and the endpoint, for a
// non-local endpoint without keys (saying how to make them), or keys without what that side needs (for a server:
// the admitted client keys and the ZAP handler of `context`, the socket's context).
bool secure_bind(zmq::context_t& context, zmq::socket_t& socket, const std::string& endpoint,
                 const CurveOptions& options, const std::string& who);
bool secure_connect(zmq::socket_t& socket, const std::string& endpoint, const CurveOptions& options,
                    const std::string& who);

// Watches a connecting socket's handshakes (ZMQ_EVENT_HANDSHAKE_FAILED_*), so that a client the server refuses
// says so instead of only waiting out a timeout. Holds a PAIR socket of the same context: destroy it before the
// context.
class HandshakeMonitor {
 public:
  HandshakeMonitor() = default;
  HandshakeMonitor(zmq::context_t& context, zmq::socket_t& socket, bool curve);
  HandshakeMonitor(HandshakeMonitor&&) = default;
  HandshakeMonitor& operator=(HandshakeMonitor&&) = default;

  // Reads the events that arrived. Returns why the peer refused us ("" when it did not): the server refused our
  // CURVE key (ZAP), or the two sides disagree on CURVE. Such a refusal does not go away by waiting.
  std::string refusal();
  // The last handshake failure of any kind seen (refusal() reads the events), for a timeout's message; "" if none.
  const std::string& last_failure() const { return last_failure_; }
  // Readable when events are waiting (for polling with other sockets); null when not watching.
  void* handle() { return events_ ? events_.handle() : nullptr; }

 private:
  zmq::socket_t events_;
  bool curve_ = false;
  std::string refusal_, last_failure_;
};

}  // namespace rlcpp
