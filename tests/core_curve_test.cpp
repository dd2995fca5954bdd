// CURVE key files (round trip, no overwrite, permission and content refusals), the endpoint policy, and the ZAP
// handler: over tcp://127.0.0.1 an admitted client key gets through, any other gets nothing and is told why.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/curve.h"
#include "core/error.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

class CurveKeyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
    dir_ = fs::temp_directory_path() / ("rlcpp_curve_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text, mode_t mode) {
    std::ofstream(path(name)) << text;
    ::chmod(path(name).c_str(), mode);
    return path(name);
  }
  fs::path dir_;
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST_F(CurveKeyFiles, SavedPairLoadsBackWithOwnerOnlyKeyFile) {
  const CurveKeys keys = generate_curve_keys();
  ASSERT_EQ(keys.public_key.size(), kCurveKeyChars);
  ASSERT_EQ(keys.secret_key.size(), kCurveKeyChars);
  save_curve_keys(path("w0"), keys);
  EXPECT_EQ(mode_of(path("w0.key")), 0600u);
  EXPECT_EQ(mode_of(path("w0.pub")), 0644u);
  const CurveKeys loaded = load_curve_key_file(path("w0.key"));
  EXPECT_EQ(loaded.public_key, keys.public_key);
  EXPECT_EQ(loaded.secret_key, keys.secret_key);
  EXPECT_EQ(load_curve_public_key(path("w0.pub")), keys.public_key);
  EXPECT_EQ(read(path("w0.pub")).find(keys.secret_key), std::string::npos) << "the .pub file holds the secret";
  // Two pairs differ.
  EXPECT_NE(generate_curve_keys().secret_key, keys.secret_key);
}

TEST_F(CurveKeyFiles, SavingNeverOverwrites) {
  const CurveKeys first = generate_curve_keys();
  save_curve_keys(path("w0"), first);
  const std::string key_text = read(path("w0.key")), pub_text = read(path("w0.pub"));
  expect_error([&] { save_curve_keys(path("w0"), generate_curve_keys()); }, {path("w0.key"), "exists already"});
  EXPECT_EQ(read(path("w0.key")), key_text);
  EXPECT_EQ(read(path("w0.pub")), pub_text);
  // Either file existing is enough, and the other one is not created.
  write("only.pub", "mine\n", 0644);
  expect_error([&] { save_curve_keys(path("only"), generate_curve_keys()); }, {path("only.pub"), "exists already"});
  EXPECT_FALSE(fs::exists(path("only.key")));
  EXPECT_EQ(read(path("only.pub")), "mine\n");
  write("lone.key", "secret\n", 0600);
  expect_error([&] { save_curve_keys(path("lone"), generate_curve_keys()); }, {path("lone.key"), "exists already"});
  EXPECT_FALSE(fs::exists(path("lone.pub")));
  EXPECT_EQ(read(path("lone.key")), "secret\n");
}

TEST_F(CurveKeyFiles, KeyFileOpenToOthersIsRefused) {
  save_curve_keys(path("w0"), generate_curve_keys());
  for (mode_t mode : {0640, 0604, 0644, 0660}) {
    ::chmod(path("w0.key").c_str(), mode);
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
    expect_error([&] { load_curve_key_file(path("w0.key")); }, {path("w0.key"), text, "chmod 600"});
  }
  ::chmod(path("w0.key").c_str(), 0400);  // stricter than 0600 is fine
  EXPECT_NO_THROW(load_curve_key_file(path("w0.key")));
}

TEST_F(CurveKeyFiles, AKeyFileThatIsNoFileOrOnlyAPublicKeyIsNamedAsWhatItIs) {
  // Each was told to chmod 600 (a directory's and /dev/zero's modes are open to others); none is a mode problem.
  fs::create_directory(path("dir.key"));
  std::string e = error_of([&] { load_curve_key_file(path("dir.key")); });
  EXPECT_NE(e.find(path("dir.key") + ": is a directory, not a CURVE key file"), std::string::npos) << e;
  EXPECT_EQ(e.find("chmod"), std::string::npos) << e;
  fs::create_symlink("/dev/zero", path("zero.key"));
  e = error_of([&] { load_curve_key_file(path("zero.key")); });
  EXPECT_NE(e.find(path("zero.key") + " (a symbolic link to /dev/zero): is a character device, not a CURVE key file"),
            std::string::npos)
      << e;
  e = error_of([&] { load_curve_public_key(path("zero.key")); });
  EXPECT_NE(e.find("is a character device"), std::string::npos) << e;
  save_curve_keys(path("w0"), generate_curve_keys());  // w0.pub: mode 0644, a public key only
  e = error_of([&] { load_curve_key_file(path("w0.pub")); });
  EXPECT_NE(e.find("'" + path("w0.pub") + "' has no 'secret-key = KEY' line: it holds only a public key, as a .pub "
                    "file does; give the .key file"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("chmod"), std::string::npos) << e;
}

TEST_F(CurveKeyFiles, BadKeyContentIsRefusedNamingTheFile) {
  const CurveKeys keys = generate_curve_keys(), other = generate_curve_keys();
  expect_error([&] { load_curve_key_file(path("absent.key")); }, {path("absent.key"), "cannot be read", "rlcpp keys"});
  expect_error([&] { load_curve_public_key(path("absent.pub")); }, {path("absent.pub"), "cannot be read"});
  // Wrong length.
  const std::string short_key = write("short.pub", "public-key = " + keys.public_key.substr(0, 39) + "\n", 0644);
  expect_error([&] { load_curve_public_key(short_key); }, {short_key, "line 1", "40 z85 characters, got 39"});
  // A character outside z85.
  std::string bent = keys.public_key;
  bent[7] = '~';
  const std::string not_z85 = write("bent.pub", "# a comment\npublic-key = " + bent + "\n", 0644);
  expect_error([&] { load_curve_public_key(not_z85); }, {not_z85, "line 2", "character 8", "not z85"});
  // A line that is no key.
  const std::string junk = write("junk.pub", "hello world\n", 0644);
  expect_error([&] { load_curve_public_key(junk); }, {junk, "line 1", "expected 'public-key = KEY'"});
  const std::string empty = write("empty.pub", "# nothing\n", 0644);
  expect_error([&] { load_curve_public_key(empty); }, {empty, "no 'public-key = KEY' line"});
  // A secret in a file handed out as public.
  const std::string leaked = write("leaked.pub", "public-key = " + keys.public_key + "\nsecret-key = " +
                                                     keys.secret_key + "\n", 0600);
  expect_error([&] { load_curve_public_key(leaked); }, {leaked, "holds a secret key"});
  // A .pub given as the key pair; a pair whose halves do not match.
  const std::string pub_only = write("pub_only.key", "public-key = " + keys.public_key + "\n", 0600);
  expect_error([&] { load_curve_key_file(pub_only); }, {pub_only, "no 'secret-key = KEY' line"});
  const std::string mixed = write("mixed.key", "public-key = " + other.public_key + "\nsecret-key = " +
                                                   keys.secret_key + "\n", 0600);
  expect_error([&] { load_curve_key_file(mixed); }, {mixed, "does not belong to its secret key"});
  const std::string twice = write("twice.pub", "public-key = " + keys.public_key + "\npublic-key = " +
                                                   keys.public_key + "\n", 0644);
  expect_error([&] { load_curve_public_key(twice); }, {twice, "line 2", "a second public-key"});
}

TEST(CurvePolicy, NonLocalEndpointsNeedKeysAndLocalOnesStayPlain) {
  if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
  zmq::context_t ctx, other_ctx;
  zmq::socket_t s(ctx, zmq::socket_type::router);
  const CurveOptions none;
  EXPECT_FALSE(secure_bind(ctx, s, "tcp://127.0.0.1:*", none, "test"));
  EXPECT_FALSE(secure_bind(ctx, s, "ipc:///tmp/x.ipc", none, "test"));
  EXPECT_FALSE(secure_connect(s, "tcp://localhost:5555", none, "test"));
  for (const std::string e : {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.1.2.3:5555", "tcp://eth0:5555",
                              "tcp://127.0.0.1:0;10.1.2.3:5555", "tcp://127.evil.example:5555"}) {
    expect_error([&] { secure_bind(ctx, s, e, none, "test"); }, {"test: endpoint '" + e + "'", "rlcpp keys"});
    expect_error([&] { secure_connect(s, e, none, "test"); }, {"test: endpoint '" + e + "'", "--curve-server"});
  }
  expect_error([&] { secure_bind(ctx, s, "pgm://eth0;239.192.1.1:5555", none, "test"); }, {"'pgm' is not supported"});

  // Keys make every ipc and tcp socket CURVE, and each side needs its half.
  ZapHandler zap(ctx);
  CurveOptions keyed;
  keyed.keys = generate_curve_keys();
  expect_error([&] { secure_bind(ctx, s, "tcp://0.0.0.0:5555", keyed, "test"); }, {"--curve-clients"});
  expect_error([&] { secure_connect(s, "tcp://10.1.2.3:5555", keyed, "test"); }, {"--curve-server"});
  keyed.clients = {generate_curve_keys().public_key};
  expect_error([&] { secure_bind(ctx, s, "tcp://0.0.0.0:5555", keyed, "test"); }, {"ZAP handler"});
  ZapHandler other_zap(other_ctx);
  keyed.zap = &other_zap;  // a handler of another context would never be asked
  expect_error([&] { secure_bind(ctx, s, "tcp://0.0.0.0:5555", keyed, "test"); }, {"ZAP handler"});
  keyed.zap = &zap;
  EXPECT_TRUE(secure_bind(ctx, s, "tcp://0.0.0.0:5555", keyed, "test"));
  EXPECT_EQ(s.get(zmq::sockopt::curve_server), true);
  zmq::socket_t c(ctx, zmq::socket_type::dealer);
  keyed.server_public = generate_curve_keys().public_key;
  EXPECT_TRUE(secure_connect(c, "ipc:///tmp/x.ipc", keyed, "test"));
  EXPECT_FALSE(secure_connect(c, "inproc://x", keyed, "test"));  // no handshake within a process
  // One handler per context.
  expect_error([&] { ZapHandler second(ctx); }, {"another handler runs in this ZeroMQ context"});
  s.set(zmq::sockopt::linger, 0);
  c.set(zmq::sockopt::linger, 0);
}

// A CURVE ROUTER over tcp://127.0.0.1 and DEALER clients: (client keys, server public key the client uses).
struct CurveBench {
  zmq::context_t ctx;
  ZapHandler zap{ctx};
  CurveKeys server = generate_curve_keys(), good = generate_curve_keys(), stranger = generate_curve_keys();
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::string endpoint;

  CurveBench() {
    router.set(zmq::sockopt::linger, 0);
    make_curve_server(router, server, {good.public_key}, zap);
    router.bind("tcp://127.0.0.1:*");
    endpoint = router.get(zmq::sockopt::last_endpoint);
  }
  // Sends "hello" from a client with `keys` (none when empty) expecting `server_public`; returns what the
  // router received within `wait_ms` ("" = nothing) and, through `refusal`, what the client's monitor said.
  std::string hello(const CurveKeys* keys, const std::string& server_public, std::string& refusal, long wait_ms) {
    zmq::socket_t client(ctx, zmq::socket_type::dealer);
    client.set(zmq::sockopt::linger, 0);
    if (keys) make_curve_client(client, *keys, server_public);
    HandshakeMonitor monitor(ctx, client, keys != nullptr);
    client.connect(endpoint);
    (void)client.send(zmq::str_buffer("hello"), zmq::send_flags::none);
    std::string got;
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(wait_ms)) {
      zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}, {monitor.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(20));
      if (items[1].revents & ZMQ_POLLIN) refusal = monitor.refusal();
      if (items[0].revents & ZMQ_POLLIN) {
        zmq::message_t identity, body;
        (void)router.recv(identity);
        (void)router.recv(body);
        got = body.to_string();
        break;
      }
      if (!refusal.empty()) break;
    }
    if (refusal.empty()) {
      monitor.refusal();
      refusal = monitor.last_failure();
    }
    return got;
  }
};

TEST(CurveZap, AdmitsOnlyListedClientKeys) {
  if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
  CurveBench b;
  std::string refusal;
  EXPECT_EQ(b.hello(&b.good, b.server.public_key, refusal, 5000), "hello");
  EXPECT_EQ(refusal, "");
  EXPECT_EQ(b.zap.admitted(), 1);
  // An unknown client key: ZAP says 400, the router gets nothing, the client's monitor says why.
  EXPECT_EQ(b.hello(&b.stranger, b.server.public_key, refusal, 5000), "");
  EXPECT_NE(refusal.find("authentication failed"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("ZAP status 400"), std::string::npos) << refusal;
  EXPECT_GE(b.zap.refused(), 1);
  // No keys at all (a plain client): the mechanisms disagree; nothing gets through.
  refusal.clear();
  EXPECT_EQ(b.hello(nullptr, "", refusal, 5000), "");
  EXPECT_NE(refusal.find("the server requires CURVE"), std::string::npos) << refusal;
  // The right client key but a wrong server key: the server cannot read the handshake and drops it.
  refusal.clear();
  EXPECT_EQ(b.hello(&b.good, b.stranger.public_key, refusal, 1000), "");
  EXPECT_NE(refusal.find("CURVE handshake"), std::string::npos) << refusal;
  // Still admitting the good client.
  refusal.clear();
  EXPECT_EQ(b.hello(&b.good, b.server.public_key, refusal, 5000), "hello");
  EXPECT_EQ(b.zap.admitted(), 2);
}

}  // namespace
}  // namespace rlcpp
