#include "core/curve.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/endpoint.h"
#include "core/input_file.h"

namespace rlcpp {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
constexpr const char* kHowToMakeKeys =
    "make a key pair on each side with `rlcpp keys PREFIX`, then give the side that binds --curve-key PREFIX.key "
    "and --curve-clients CLIENT.pub[,...], the side that connects --curve-key PREFIX.key and --curve-server "
    "SERVER.pub (rollout/README.md \"Remote workers\")";

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

// The "public-key" and "secret-key" lines of a key file, "" where absent.
struct KeyFileLines {
  std::string public_key, secret_key;
};

// A key file opened for reading: a regular file of a key file's size (InputFile), else an error saying what
// it is (a directory, a device).
InputFile open_key_file(const std::string& path) {
  struct stat st;
  RLCPP_CHECK(::stat(path.c_str(), &st) == 0,
              "CURVE key file '" << path << "' cannot be read: " << std::strerror(errno) << "; " << kHowToMakeKeys);
  return InputFile(path, kKeyFileInput);
}

KeyFileLines read_key_lines(const InputFile& in) {
  const std::string& path = in.path();
  KeyFileLines keys;
  in.for_each_line([&](std::string_view line, int64_t number) {
    const std::string text = trim(std::string(line));
    if (text.empty() || text[0] == '#') return;
    const size_t eq = text.find('=');  // the first: '=' is also a z85 character
    const std::string name = eq == std::string::npos ? "" : trim(text.substr(0, eq));
    RLCPP_CHECK(name == "public-key" || name == "secret-key",
                "CURVE key file '" << path << "' line " << number
                                   << ": expected 'public-key = KEY' or 'secret-key = KEY' (z85), got "
                                   << (name.empty() ? std::string("no 'NAME ='") : "'" + name + " ='"));
    std::string& slot = name == "public-key" ? keys.public_key : keys.secret_key;
    RLCPP_CHECK(slot.empty(), "CURVE key file '" << path << "' line " << number << ": a second " << name << " line");
    slot = trim(text.substr(eq + 1));
    check_curve_key(slot, "CURVE key file '" + path + "' line " + std::to_string(number) + " (" + name + ")");
  });
  return keys;
}

// Creates `path` for writing only if it does not exist (O_EXCL), with `mode` exactly; returns the descriptor.
int create_new_file(const std::string& path, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  RLCPP_CHECK(fd >= 0 || errno != EEXIST, "'" << path << "' exists already; it is not overwritten (remove it "
                                              << "or choose another PREFIX)");
  RLCPP_CHECK(fd >= 0, "cannot create '" << path << "': " << std::strerror(errno));
  ::fchmod(fd, mode);  // the umask may have taken bits of `mode`; what it asks for is exactly `mode`
  return fd;
}

void write_all(int fd, const std::string& path, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    RLCPP_CHECK(n > 0, "cannot write '" << path << "': " << std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  RLCPP_CHECK(::fsync(fd) == 0, "cannot write '" << path << "': " << std::strerror(errno));
}

std::string z85_of(const void* bytes) {
  char z85[kCurveKeyChars + 1];
  zmq_z85_encode(z85, static_cast<const uint8_t*>(bytes), 32);
  return z85;
}

}  // namespace

bool curve_supported() { return zmq_has("curve") != 0; }

void check_curve_key(const std::string& key, const std::string& what) {
  RLCPP_CHECK(key.size() == kCurveKeyChars,
              what << ": a CURVE key is " << kCurveKeyChars << " z85 characters, got " << key.size());
  const size_t bad = key.find_first_not_of(kZ85Alphabet);
  RLCPP_CHECK(bad == std::string::npos,
              what << ": character " << bad + 1 << " of the key is not z85 (byte " << static_cast<int>(key[bad]) << ")");
  uint8_t bytes[32];
  RLCPP_CHECK(zmq_z85_decode(bytes, key.c_str()) != nullptr, what << ": the key is not valid z85");
}

CurveKeys generate_curve_keys() {
  RLCPP_CHECK(curve_supported(), "this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
  char public_key[kCurveKeyChars + 1], secret_key[kCurveKeyChars + 1];
  RLCPP_CHECK(zmq_curve_keypair(public_key, secret_key) == 0, "zmq_curve_keypair failed: " << zmq_strerror(zmq_errno()));
  return {public_key, secret_key};
}

void save_curve_keys(const std::string& prefix, const CurveKeys& keys) {
  check_curve_key(keys.public_key, "public key to save");
  check_curve_key(keys.secret_key, "secret key to save");
  const std::string key_path = prefix + ".key", pub_path = prefix + ".pub";
  struct stat st;
  for (const std::string& path : {key_path, pub_path})
    RLCPP_CHECK(::lstat(path.c_str(), &st) != 0,
                "'" << path << "' exists already; it is not overwritten (remove it or choose another PREFIX)");
  const int key_fd = create_new_file(key_path, 0600);
  try {
    write_all(key_fd, key_path,
              "# rlcpp CURVE key pair (rlcpp keys): keep it on this machine, readable by its owner only\n"
              "public-key = " + keys.public_key + "\nsecret-key = " + keys.secret_key + "\n");
    ::close(key_fd);
  } catch (...) {
    ::close(key_fd);
    ::unlink(key_path.c_str());  // ours: created above
    throw;
  }
  try {
    const int pub_fd = create_new_file(pub_path, 0644);
    try {
      write_all(pub_fd, pub_path,
                "# rlcpp CURVE public key (rlcpp keys): give it to the peers that admit or reach this one\n"
                "public-key = " + keys.public_key + "\n");
      ::close(pub_fd);
    } catch (...) {
      ::close(pub_fd);
      ::unlink(pub_path.c_str());
      throw;
    }
  } catch (...) {
    ::unlink(key_path.c_str());  // a pair is saved whole or not at all
    throw;
  }
}

CurveKeys load_curve_key_file(const std::string& path) {
  const InputFile in = open_key_file(path);
  // What the file holds first: a .pub given here is named as one, whatever its mode.
  const KeyFileLines lines = read_key_lines(in);
  RLCPP_CHECK(!lines.secret_key.empty(),
              "CURVE key file '" << path << "' has no 'secret-key = KEY' line"
                                 << (lines.public_key.empty() ? std::string()
                                                              : ": it holds only a public key, as a .pub file does")
                                 << "; give the .key file of `rlcpp keys` (the key pair)");
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(in.permissions()));
  RLCPP_CHECK((in.permissions() & 077) == 0, "CURVE key file '" << path << "' holds a secret key but is open to group "
                                                                << "or others (mode " << mode << "); refused, as ssh "
                                                                << "does: chmod 600 '" << path << "'");
  RLCPP_CHECK(!lines.public_key.empty(), "CURVE key file '" << path << "' has no 'public-key = KEY' line");
  char derived[kCurveKeyChars + 1];
  RLCPP_CHECK(zmq_curve_public(derived, lines.secret_key.c_str()) == 0,
              "CURVE key file '" << path << "': cannot derive the public key: " << zmq_strerror(zmq_errno()));
  RLCPP_CHECK(lines.public_key == derived,
              "CURVE key file '" << path << "': its public key does not belong to its secret key");
  return {lines.public_key, lines.secret_key};
}

std::string load_curve_public_key(const std::string& path) {
  const KeyFileLines lines = read_key_lines(open_key_file(path));
  RLCPP_CHECK(lines.secret_key.empty(), "CURVE public key file '" << path << "' holds a secret key: give peers the "
                                                                  << ".pub file of `rlcpp keys`, never the .key file");
  RLCPP_CHECK(!lines.public_key.empty(), "CURVE public key file '" << path << "' has no 'public-key = KEY' line");
  return lines.public_key;
}

// ---- ZAP handler ----

ZapHandler::ZapHandler(zmq::context_t& context) : context_(context.handle()), socket_(context, zmq::socket_type::rep) {
  RLCPP_CHECK(curve_supported(), "this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    RLCPP_FAIL("ZAP handler: cannot bind " << kZapEndpoint << ": "
                                          << (e.num() == EADDRINUSE ? "another handler runs in this ZeroMQ context"
                                                                    : e.what()));
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  RLCPP_CHECK(wake_fd_ >= 0, "ZAP handler: eventfd failed: " << std::strerror(errno));
  thread_ = std::thread([this] { run(); });  // from here on only the thread touches socket_
}

ZapHandler::~ZapHandler() {
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0) std::perror("ZAP handler: waking the thread failed");
  thread_.join();
  ::close(wake_fd_);
}

std::string ZapHandler::add_domain(const std::vector<std::string>& client_publics) {
  RLCPP_CHECK(!client_publics.empty(), "ZAP handler: a CURVE server must admit at least one client public key");
  for (const std::string& key : client_publics) check_curve_key(key, "admitted client public key");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string domain = "rlcpp-" + std::to_string(domains_.size() + 1);
  domains_[domain] = std::set<std::string>(client_publics.begin(), client_publics.end());
  return domain;
}

// Request (RFC 27): version, request id, domain, address, identity, mechanism, credentials... Reply: version,
// request id, status code, status text, user id, metadata.
std::vector<std::string> ZapHandler::answer(const std::vector<zmq::message_t>& request) {
  const std::string request_id = request.size() > 1 ? request[1].to_string() : "";
  auto refuse = [&](const std::string& code, const std::string& text) {
    ++refused_;
    return std::vector<std::string>{"1.0", request_id, code, text, "", ""};
  };
  if (request.size() < 6 || request[0].to_string() != "1.0") return refuse("500", "malformed ZAP request");
  const std::string domain = request[2].to_string(), mechanism = request[5].to_string();
  if (mechanism != "CURVE" || request.size() != 7 || request[6].size() != 32)
    return refuse("400", "CURVE credentials expected");
  const std::string client = z85_of(request[6].data());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = domains_.find(domain);
    if (it == domains_.end()) return refuse("400", "unknown ZAP domain");
    if (!it->second.count(client)) return refuse("400", "client public key not admitted");
  }
  ++admitted_;
  return {"1.0", request_id, "200", "OK", client, ""};
}

void ZapHandler::run() {
  try {
    while (true) {
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) break;
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> request;
      bool more = true;
      while (more) {
        zmq::message_t frame;
        if (!socket_.recv(frame, zmq::recv_flags::dontwait)) break;
        more = frame.more();
        request.push_back(std::move(frame));
      }
      if (request.empty()) continue;
      const std::vector<std::string> reply = answer(request);
      for (size_t i = 0; i < reply.size(); ++i)
        (void)socket_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  } catch (const zmq::error_t&) {
    // ETERM: the context is ending before its handler; close the socket below so that it can.
  }
  socket_.close();
}

// ---- socket setup and policy ----

void make_curve_server(zmq::socket_t& socket, const CurveKeys& keys,
                       const std::vector<std::string>& allowed_client_publics, ZapHandler& zap) {
  check_curve_key(keys.secret_key, "CURVE server secret key");
  const std::string domain = zap.add_domain(allowed_client_publics);
  socket.set(zmq::sockopt::zap_domain, domain);
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, keys.secret_key);
}

void make_curve_client(zmq::socket_t& socket, const CurveKeys& own_keys, const std::string& server_public) {
  check_curve_key(own_keys.public_key, "CURVE client public key");
  check_curve_key(own_keys.secret_key, "CURVE client secret key");
  check_curve_key(server_public, "CURVE server public key");
  socket.set(zmq::sockopt::curve_serverkey, server_public);
  socket.set(zmq::sockopt::curve_publickey, own_keys.public_key);
  socket.set(zmq::sockopt::curve_secretkey, own_keys.secret_key);
}

namespace {

// Whether a socket on `endpoint` uses CURVE under `options` (see the top of curve.h).
bool curve_applies(const std::string& endpoint, const CurveOptions& options, const std::string& who) {
  const bool local = is_local_endpoint(endpoint);  // throws for a malformed endpoint or transport
  if (endpoint.rfind("inproc://", 0) == 0) return false;  // no handshake: within this process
  if (options.configured()) {
    RLCPP_CHECK(curve_supported(), who << ": CURVE keys were given but this libzmq was built without CURVE");
    return true;
  }
  RLCPP_CHECK(local, who << ": endpoint '" << endpoint << "' reaches beyond this machine, where anyone could send "
                         << "to it; such endpoints need CURVE authentication: " << kHowToMakeKeys);
  return false;
}

}  // namespace

bool secure_bind(zmq::context_t& context, zmq::socket_t& socket, const std::string& endpoint,
                 const CurveOptions& options, const std::string& who) {
  if (!curve_applies(endpoint, options, who)) return false;
  RLCPP_CHECK(!options.clients.empty(), who << ": listening on '" << endpoint << "' with CURVE needs the public keys "
                                            << "of the clients it admits (--curve-clients CLIENT.pub[,...])");
  RLCPP_CHECK(options.zap != nullptr && options.zap->context_handle() == context.handle(),
              who << ": listening on '" << endpoint << "' with CURVE needs the ZAP handler of its ZeroMQ context "
                  << "(core/curve.h ZapHandler); without one any client would be let in");
  make_curve_server(socket, options.keys, options.clients, *options.zap);
  return true;
}

bool secure_connect(zmq::socket_t& socket, const std::string& endpoint, const CurveOptions& options,
                    const std::string& who) {
  if (!curve_applies(endpoint, options, who)) return false;
  RLCPP_CHECK(!options.server_public.empty(), who << ": connecting to '" << endpoint << "' with CURVE needs the "
                                                  << "server's public key (--curve-server SERVER.pub)");
  make_curve_client(socket, options.keys, options.server_public);
  return true;
}

// ---- handshake monitor ----

HandshakeMonitor::HandshakeMonitor(zmq::context_t& context, zmq::socket_t& socket, bool curve) : curve_(curve) {
  // Unique while the socket lives; the time tells apart a later socket at the same address.
  char name[96];
  std::snprintf(name, sizeof name, "inproc://rlcpp-handshake-%p-%lld", socket.handle(),
                static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
  RLCPP_CHECK(zmq_socket_monitor(socket.handle(), name, events) == 0,
              "cannot monitor a socket's handshakes: " << zmq_strerror(zmq_errno()));
  events_ = zmq::socket_t(context, zmq::socket_type::pair);
  events_.set(zmq::sockopt::linger, 0);
  events_.connect(name);
}

std::string HandshakeMonitor::refusal() {
  while (events_) {
    zmq::message_t event, address;
    if (!events_.recv(event, zmq::recv_flags::dontwait)) break;
    if (event.more()) (void)events_.recv(address);
    if (event.size() < 6) continue;
    uint16_t kind = 0;
    uint32_t value = 0;
    std::memcpy(&kind, event.data(), 2);
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
    if (kind == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      refusal_.clear();
      last_failure_.clear();
    } else if (kind == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      refusal_ = "authentication failed: the server refused this side's CURVE public key (ZAP status " +
                 std::to_string(value) + "); it is not among the keys the server admits (its --curve-clients)";
    } else if (kind == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
      char code[16];
      std::snprintf(code, sizeof code, "0x%x", value);
      if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        refusal_ = curve_ ? "authentication failed: this side uses CURVE and the server does not (it was started "
                            "without --curve-key)"
                          : "authentication failed: the server requires CURVE and this side has no keys "
                            "(--curve-key, --curve-server)";
      else
        refusal_ = std::string("authentication failed: the CURVE handshake broke the protocol (ZMQ protocol error ") +
                   code + ")";
    } else if (kind == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      last_failure_ = curve_ ? "the server closed the connection during the CURVE handshake (authentication "
                               "failed? --curve-server must be the server's public key)"
                             : std::string("a connection handshake failed: ") + zmq_strerror(static_cast<int>(value));
    }
    if (!refusal_.empty()) last_failure_ = refusal_;
  }
  return refusal_;
}

}  // namespace rlcpp
