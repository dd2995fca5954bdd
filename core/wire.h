// Wire messages: how processes talk over ZeroMQ. A message is multipart:
//   frame 0      JSON header (an object with a string "type"; the codec adds "arrays", the list of
//                {"name", "dtype", "shape"} describing the frames that follow, in order)
//   frames 1..k  one raw little-endian array each, row-major, exactly prod(shape) * dtype bytes
// Every size and count is checked against the header and the limits before an array is handed out, so a
// malformed, truncated or oversized message becomes a WireError naming what was wrong, never a bad read.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"

namespace rlcpp {

// A message that failed validation; the receiver answers it with an error reply and keeps serving.
class WireError : public Error {
 public:
  using Error::Error;
};

enum class WireDType : uint8_t { kU8, kI32, kI64, kF32, kF64 };
size_t wire_dtype_size(WireDType dtype);
const char* wire_dtype_name(WireDType dtype);

template <class T> constexpr WireDType wire_dtype_of();
template <> constexpr WireDType wire_dtype_of<uint8_t>() { return WireDType::kU8; }
template <> constexpr WireDType wire_dtype_of<int32_t>() { return WireDType::kI32; }
template <> constexpr WireDType wire_dtype_of<int64_t>() { return WireDType::kI64; }
template <> constexpr WireDType wire_dtype_of<float>() { return WireDType::kF32; }
template <> constexpr WireDType wire_dtype_of<double>() { return WireDType::kF64; }

struct WireLimits {
  int64_t max_message_bytes = int64_t{1} << 30;  // header + all arrays
  int64_t max_header_bytes = int64_t{1} << 20;
  int64_t max_arrays = 64;
  int64_t max_dims = 8;
  // Frames received as one multipart message (envelope included) before the rest is drained unread.
  int64_t max_frames() const { return max_arrays + 4; }
};

struct WireArray {
  std::string name;
  WireDType dtype = WireDType::kU8;
  std::vector<int64_t> shape;
  std::string bytes;  // prod(shape) * wire_dtype_size(dtype) bytes

  int64_t numel() const;
};

class WireMessage {
 public:
  WireMessage() = default;
  explicit WireMessage(const std::string& type);

  Json header = Json::object();
  std::vector<WireArray> arrays;

  std::string type() const;

  // Adds a 1-d array of `values` (shape {size}) or of the given shape (numel must match).
  template <class T> void add(const std::string& name, const std::vector<T>& values, std::vector<int64_t> shape = {});

  bool has(const std::string& name) const;
  const WireArray& array(const std::string& name) const;  // WireError when absent
  // The values of array `name`, which must have dtype T and `expected_numel` elements when that is >= 0;
  // the error names the array, what it has and what was expected.
  template <class T> std::vector<T> get(const std::string& name, int64_t expected_numel = -1) const;

  int64_t byte_size() const;  // header (as encoded) + arrays
};

// Frames of a message: the header frame, then one frame per array.
std::vector<zmq::message_t> encode_wire_message(const WireMessage& message);
// Validates and decodes frames (header first); throws WireError.
WireMessage decode_wire_message(std::vector<zmq::message_t>& frames, const WireLimits& limits);

// One multipart message as received: `envelope` holds the frames before the header (a ROUTER socket's peer
// identity), `frames` the header and arrays. When the message broke a limit while it was read, `error` says
// which and `frames` is empty (the remaining parts were drained so the socket stays in step).
struct ReceivedFrames {
  std::vector<zmq::message_t> envelope;
  std::vector<zmq::message_t> frames;
  std::string error;
  int64_t bytes = 0;
};

// Receives one whole multipart message. `envelope_frames` frames are taken as the envelope (1 for a ROUTER,
// 0 for a DEALER). Returns false when nothing arrived within `timeout_ms` (-1 = wait).
bool receive_frames(zmq::socket_t& socket, int envelope_frames, const WireLimits& limits, long timeout_ms,
                    ReceivedFrames& out);
// Sends envelope (may be empty) + the message's frames. With `dont_wait` a message the socket cannot take
// now (no peer, queue full) is dropped and false returned; otherwise the call blocks as the socket does.
bool send_wire_message(zmq::socket_t& socket, const std::vector<zmq::message_t>& envelope,
                       const WireMessage& message, bool dont_wait = false);

// Binds `socket` to `endpoint`; when it cannot, throws "WHO: cannot listen on ENDPOINT: REASON", REASON being
// "address in use" when another socket holds the address, else ZeroMQ's message.
void bind_endpoint(zmq::socket_t& socket, const std::string& endpoint, const std::string& who);

// ---- template definitions ----

template <class T> void WireMessage::add(const std::string& name, const std::vector<T>& values,
                                         std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  RLCPP_CHECK(numel == static_cast<int64_t>(values.size()),
              "wire array '" << name << "': shape has " << numel << " elements, values " << values.size());
  RLCPP_CHECK(!has(name), "wire array '" << name << "' added twice");
  WireArray a;
  a.name = name;
  a.dtype = wire_dtype_of<T>();
  a.shape = std::move(shape);
  a.bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  arrays.push_back(std::move(a));
}

template <class T> std::vector<T> WireMessage::get(const std::string& name, int64_t expected_numel) const {
  const WireArray& a = array(name);
  if (a.dtype != wire_dtype_of<T>())
    throw WireError("wire array '" + name + "' has dtype " + wire_dtype_name(a.dtype) + ", expected " +
                    wire_dtype_name(wire_dtype_of<T>()));
  const int64_t n = a.numel();
  if (expected_numel >= 0 && n != expected_numel)
    throw WireError("wire array '" + name + "' has " + std::to_string(n) + " elements, expected " +
                    std::to_string(expected_numel));
  std::vector<T> out(static_cast<size_t>(n));
  if (n > 0) std::memcpy(out.data(), a.bytes.data(), static_cast<size_t>(n) * sizeof(T));
  return out;
}

}  // namespace rlcpp
