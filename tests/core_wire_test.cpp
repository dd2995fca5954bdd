#include <gtest/gtest.h>

#include <string>

#include "core/endpoint.h"
#include "core/wire.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

WireMessage sample_message() {
  WireMessage m("generate");
  m.header["n"] = 8;
  m.add<int32_t>("tokens", {1, 5, 7, 9, 2, 4});
  m.add<int64_t>("offsets", {0, 2, 6});
  m.add<float>("grid", {1.5f, -2.0f, 0.25f, 4.0f, 5.0f, 6.0f}, {2, 3});
  return m;
}

std::string decode_error(std::vector<zmq::message_t>& frames, const WireLimits& limits = {}) {
  try {
    decode_wire_message(frames, limits);
  } catch (const WireError& e) {
    return e.what();
  }
  return "";
}

// Replaces the header frame with `header` text.
void set_header(std::vector<zmq::message_t>& frames, const std::string& header) {
  frames[0] = zmq::message_t(header.data(), header.size());
}

TEST(Wire, RoundTripsHeaderAndArrays) {
  auto frames = encode_wire_message(sample_message());
  ASSERT_EQ(frames.size(), 4u);
  WireMessage m = decode_wire_message(frames, {});
  EXPECT_EQ(m.type(), "generate");
  EXPECT_EQ(m.header["n"], 8);
  EXPECT_FALSE(m.header.contains("arrays"));  // the codec's own key is consumed
  EXPECT_EQ(m.get<int32_t>("tokens", 6), (std::vector<int32_t>{1, 5, 7, 9, 2, 4}));
  EXPECT_EQ(m.get<int64_t>("offsets"), (std::vector<int64_t>{0, 2, 6}));
  EXPECT_EQ(m.array("grid").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.get<float>("grid")[2], 0.25f);
}

TEST(Wire, GetChecksDtypeCountAndPresence) {
  auto frames = encode_wire_message(sample_message());
  WireMessage m = decode_wire_message(frames, {});
  EXPECT_THROW(m.get<float>("tokens"), WireError);
  EXPECT_THROW(m.get<int32_t>("tokens", 5), WireError);
  try {
    m.get<int32_t>("missing");
    FAIL() << "expected a WireError";
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find("no array 'missing'"), std::string::npos) << e.what();
  }
}

TEST(Wire, RejectsTruncatedMessage) {
  auto frames = encode_wire_message(sample_message());
  frames.pop_back();
  EXPECT_NE(decode_error(frames).find("lists 3 arrays but the message carries 2"), std::string::npos);
}

TEST(Wire, RejectsFrameWhoseSizeDisagreesWithShape) {
  auto frames = encode_wire_message(sample_message());
  frames[1] = zmq::message_t(std::string(23, 'x'));  // 6 int32 need 24 bytes
  EXPECT_NE(decode_error(frames).find("frame has 23 bytes"), std::string::npos) << decode_error(frames);
}

TEST(Wire, RejectsMalformedHeaders) {
  auto frames = encode_wire_message(sample_message());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {"[1, 2]", "must be a JSON object"},
      {R"({"n": 1})", "no string \"type\""},
      {R"({"type": "x", "arrays": 5})", "must be a list"},
      {R"({"type": "x", "arrays": [{"name": "a", "dtype": "f16", "shape": [1]}, {}, {}]})", "\"dtype\" must be"},
      {R"({"type": "x", "arrays": [{"name": "a", "dtype": "i32", "shape": [-1]}, {}, {}]})", "shape entries"},
      {R"({"type": "x", "arrays": [{"name": "a", "dtype": "i32", "shape": [1e3]}, {}, {}]})", "shape entries"},
      {R"({"type": "x", "arrays": [{"name": "a", "dtype": "i32", "shape": [1073741824, 1073741824]}, {}, {}]})",
       "exceeds the message size limit"},
      {R"({"type": "x", "arrays": [{"dtype": "i32", "shape": [6]}, {}, {}]})", "non-empty string \"name\""},
      {R"({"type": "x", "arrays": [{"name": "a", "dtype": "i32", "shape": [6]}, {"name": "a", "dtype": "i64", "shape": [3]}, {}]})",
       "appears twice"},
  };
  for (const auto& [header, expected] : cases) {
    auto copy = encode_wire_message(sample_message());
    set_header(copy, header);
    const std::string err = decode_error(copy);
    EXPECT_NE(err.find(expected), std::string::npos) << "header " << header << " gave: '" << err << "'";
  }
}

// Copying or dumping a value recurses per level, so a header this deep (well under the 1 MiB header limit)
// would overflow the stack after parsing; it is refused before anything is built (core/json_input.h).
TEST(Wire, DeeplyNestedHeaderIsAnErrorNotACrash) {
  auto frames = encode_wire_message(sample_message());
  const int64_t depth = 200000;
  set_header(frames, R"({"type":"ping","arrays":)" + std::string(depth, '[') + std::string(depth, ']') + "}");
  ASSERT_LT(static_cast<int64_t>(frames[0].size()), WireLimits{}.max_header_bytes);
  const std::string err = decode_error(frames);
  EXPECT_NE(err.find("header is not valid JSON"), std::string::npos) << err;
  EXPECT_NE(err.find("nesting deeper than the limit of 128 levels"), std::string::npos) << err;
}

// A header string that is not UTF-8 (an error reply quoting bytes it refused) is sent with U+FFFD in place of
// the bad bytes rather than failing the send; a received header holding such a byte is a WireError.
TEST(Wire, BytesThatAreNotUtf8NeitherFailTheSendNorPassTheDecode) {
  WireMessage m("error");
  m.header["message"] = std::string("bad byte \xff here");
  auto frames = encode_wire_message(m);
  const WireMessage back = decode_wire_message(frames, {});
  EXPECT_EQ(back.header["message"], "bad byte \xef\xbf\xbd here");
  set_header(frames, "{\"type\": \"ping\", \"x\": \"\xff\"}");
  EXPECT_NE(decode_error(frames).find("not valid JSON"), std::string::npos) << decode_error(frames);
}

TEST(Wire, EnforcesSizeLimits) {
  WireLimits small;
  small.max_message_bytes = 64;
  auto frames = encode_wire_message(sample_message());
  EXPECT_NE(decode_error(frames, small).find("exceeds the maximum of 64"), std::string::npos);
  WireLimits few;
  few.max_arrays = 2;
  EXPECT_NE(decode_error(frames, few).find("the maximum is 2"), std::string::npos);
  WireLimits short_header;
  short_header.max_header_bytes = 10;
  EXPECT_NE(decode_error(frames, short_header).find("header of"), std::string::npos);
  std::vector<zmq::message_t> none;
  EXPECT_NE(decode_error(none).find("empty message"), std::string::npos);
}

TEST(Wire, ReceiveDrainsOversizedMessageAndStaysInStep) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router), dealer(ctx, zmq::socket_type::dealer);
  router.bind("inproc://wire-test");
  dealer.connect("inproc://wire-test");
  WireLimits limits;
  limits.max_message_bytes = 1000;
  WireMessage big("big");
  big.add<float>("x", std::vector<float>(1000, 1.0f));
  send_wire_message(dealer, {}, big);
  send_wire_message(dealer, {}, sample_message());
  ReceivedFrames got;
  ASSERT_TRUE(receive_frames(router, 1, limits, 2000, got));
  EXPECT_EQ(got.envelope.size(), 1u);  // the dealer's identity, so an error reply can be routed
  EXPECT_TRUE(got.frames.empty());
  EXPECT_NE(got.error.find("exceeds the maximum of 1000"), std::string::npos) << got.error;
  ASSERT_TRUE(receive_frames(router, 1, limits, 2000, got));
  EXPECT_TRUE(got.error.empty()) << got.error;
  WireMessage m = decode_wire_message(got.frames, limits);
  EXPECT_EQ(m.type(), "generate");
  // Nothing further: a timeout returns false.
  EXPECT_FALSE(receive_frames(router, 1, limits, 10, got));
}

TEST(Wire, TooManyFramesIsAnErrorNotACrash) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router), dealer(ctx, zmq::socket_type::dealer);
  router.bind("inproc://wire-frames");
  dealer.connect("inproc://wire-frames");
  WireLimits limits;
  limits.max_arrays = 3;
  for (int i = 0; i < 20; ++i) {
    zmq::message_t f(std::string("f"));
    (void)dealer.send(f, i + 1 < 20 ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  ReceivedFrames got;
  ASSERT_TRUE(receive_frames(router, 1, limits, 2000, got));
  EXPECT_NE(got.error.find("more than"), std::string::npos) << got.error;
  EXPECT_TRUE(got.frames.empty());
}

TEST(Wire, BindingAnAddressInUseNamesIt) {
  zmq::context_t ctx;
  zmq::socket_t holder(ctx, zmq::socket_type::router), second(ctx, zmq::socket_type::router);
  holder.set(zmq::sockopt::linger, 0);
  second.set(zmq::sockopt::linger, 0);
  bind_endpoint(holder, "tcp://127.0.0.1:*", "test");
  const std::string endpoint = holder.get(zmq::sockopt::last_endpoint);
  try {
    bind_endpoint(second, endpoint, "test");
    FAIL() << "a second bind of " << endpoint << " must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test: cannot listen on " + endpoint + ": address in use"),
              std::string::npos)
        << e.what();
  }
}

TEST(Wire, OnlyIpcInprocAndLoopbackTcpAreLocal) {
  EXPECT_TRUE(is_local_endpoint("ipc:///tmp/x.ipc"));
  EXPECT_TRUE(is_local_endpoint("inproc://x"));
  EXPECT_TRUE(is_local_endpoint("tcp://127.0.0.1:5555"));
  EXPECT_TRUE(is_local_endpoint("tcp://127.0.0.2:*"));
  EXPECT_TRUE(is_local_endpoint("tcp://localhost:*"));
  EXPECT_TRUE(is_local_endpoint("tcp://[::1]:5555"));
  EXPECT_FALSE(is_local_endpoint("tcp://*:5555"));
  EXPECT_FALSE(is_local_endpoint("tcp://0.0.0.0:5555"));
  EXPECT_FALSE(is_local_endpoint("tcp://10.1.2.3:5555"));
  EXPECT_FALSE(is_local_endpoint("tcp://eth0:5555"));
  EXPECT_FALSE(is_local_endpoint("tcp://127.example.com:5555"));     // a name may resolve anywhere
  EXPECT_FALSE(is_local_endpoint("tcp://127.0.0.1:0;10.1.2.3:5555"));  // a source address, then where it goes
  EXPECT_THROW(is_local_endpoint("pgm://eth0;239.192.1.1:5555"), Error);
  EXPECT_THROW(is_local_endpoint("nonsense"), Error);
}

// libzmq binds "tcp://127.0.0.1:99999" to port 99999 mod 2^16 without a word.
TEST(Wire, TcpPortOutOfRangeIsAnError) {
  for (const char* bad : {"tcp://127.0.0.1:99999", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:-1", "tcp://127.0.0.1:",
                          "tcp://127.0.0.1:12ab", "tcp://127.0.0.1"})
    expect_error([&] { is_local_endpoint(bad); }, {bad, "is not a port"});
  EXPECT_TRUE(is_local_endpoint("tcp://127.0.0.1:65535"));
  EXPECT_TRUE(is_local_endpoint("tcp://127.0.0.1:0"));
}

}  // namespace
}  // namespace rlcpp
