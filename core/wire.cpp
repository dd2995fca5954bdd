#include "core/wire.h"

#include <algorithm>
#include <cerrno>

#include "core/json_input.h"

namespace rlcpp {

namespace {

[[noreturn]] void wire_fail(const std::string& message) { throw WireError(message); }

bool parse_dtype(const std::string& name, WireDType& out) {
  for (WireDType d : {WireDType::kU8, WireDType::kI32, WireDType::kI64, WireDType::kF32, WireDType::kF64})
    if (name == wire_dtype_name(d)) {
      out = d;
      return true;
    }
  return false;
}

Json array_descriptors(const WireMessage& m) {
  Json list = Json::array();
  for (const WireArray& a : m.arrays)
    list.push_back({{"name", a.name}, {"dtype", wire_dtype_name(a.dtype)}, {"shape", a.shape}});
  return list;
}

// Strings in a header may carry bytes from elsewhere that are not UTF-8 (an error reply quoting the input it
// refused); they are sent with U+FFFD in their place rather than failing the send.
std::string encoded_header(const WireMessage& m) {
  Json h = m.header;
  h["arrays"] = array_descriptors(m);
  return h.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

size_t wire_dtype_size(WireDType dtype) {
  switch (dtype) {
    case WireDType::kU8: return 1;
    case WireDType::kI32: return 4;
    case WireDType::kI64: return 8;
    case WireDType::kF32: return 4;
    case WireDType::kF64: return 8;
  }
  return 0;
}

const char* wire_dtype_name(WireDType dtype) {
  switch (dtype) {
    case WireDType::kU8: return "u8";
    case WireDType::kI32: return "i32";
    case WireDType::kI64: return "i64";
    case WireDType::kF32: return "f32";
    case WireDType::kF64: return "f64";
  }
  return "?";
}

int64_t WireArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

WireMessage::WireMessage(const std::string& type) { header["type"] = type; }

std::string WireMessage::type() const {
  auto it = header.find("type");
  return it != header.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool WireMessage::has(const std::string& name) const {
  return std::any_of(arrays.begin(), arrays.end(), [&](const WireArray& a) { return a.name == name; });
}

const WireArray& WireMessage::array(const std::string& name) const {
  for (const WireArray& a : arrays)
    if (a.name == name) return a;
  std::string present;
  for (const WireArray& a : arrays) present += (present.empty() ? "" : ", ") + a.name;
  wire_fail("message '" + type() + "' has no array '" + name + "' (it has: " +
            (present.empty() ? std::string("none") : present) + ")");
}

int64_t WireMessage::byte_size() const {
  int64_t n = static_cast<int64_t>(encoded_header(*this).size());
  for (const WireArray& a : arrays) n += static_cast<int64_t>(a.bytes.size());
  return n;
}

std::vector<zmq::message_t> encode_wire_message(const WireMessage& message) {
  RLCPP_CHECK(message.header.is_object() && message.header.contains("type") && message.header["type"].is_string(),
              "wire message header needs a string \"type\", got "
                  << message.header.dump(-1, ' ', false, Json::error_handler_t::replace));
  std::vector<zmq::message_t> frames;
  const std::string header = encoded_header(message);
  frames.emplace_back(header.data(), header.size());
  for (const WireArray& a : message.arrays) {
    RLCPP_CHECK(static_cast<int64_t>(a.bytes.size()) == a.numel() * static_cast<int64_t>(wire_dtype_size(a.dtype)),
                "wire array '" << a.name << "' holds " << a.bytes.size() << " bytes for its shape");
    frames.emplace_back(a.bytes.data(), a.bytes.size());
  }
  return frames;
}

WireMessage decode_wire_message(std::vector<zmq::message_t>& frames, const WireLimits& limits) {
  if (frames.empty()) wire_fail("empty message (no header frame)");
  int64_t total = 0;
  for (const auto& f : frames) total += static_cast<int64_t>(f.size());
  if (total > limits.max_message_bytes)
    wire_fail("message of " + std::to_string(total) + " bytes exceeds the maximum of " +
              std::to_string(limits.max_message_bytes));
  const int64_t header_bytes = static_cast<int64_t>(frames[0].size());
  if (header_bytes > limits.max_header_bytes)
    wire_fail("header of " + std::to_string(header_bytes) + " bytes exceeds the maximum of " +
              std::to_string(limits.max_header_bytes));

  WireMessage m;
  try {
    m.header = parse_json_limited(frames[0].to_string_view());
  } catch (const Json::exception& e) {
    wire_fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!m.header.is_object()) wire_fail("header must be a JSON object, got " + m.header.dump().substr(0, 80));
  auto type = m.header.find("type");
  if (type == m.header.end() || !type->is_string()) wire_fail("header has no string \"type\"");

  Json descriptors = Json::array();
  if (auto it = m.header.find("arrays"); it != m.header.end()) {
    if (!it->is_array()) wire_fail("header \"arrays\" must be a list");
    descriptors = *it;
    m.header.erase("arrays");
  }
  const int64_t listed = static_cast<int64_t>(descriptors.size());
  if (listed > limits.max_arrays)
    wire_fail("header lists " + std::to_string(listed) + " arrays, the maximum is " +
              std::to_string(limits.max_arrays));
  const int64_t carried = static_cast<int64_t>(frames.size()) - 1;
  if (listed != carried)
    wire_fail("header lists " + std::to_string(listed) + " arrays but the message carries " + std::to_string(carried) +
              " array frames (truncated or padded message)");

  for (int64_t i = 0; i < listed; ++i) {
    const Json& d = descriptors[i];
    const std::string where = "array " + std::to_string(i);
    if (!d.is_object()) wire_fail(where + ": descriptor must be an object");
    WireArray a;
    auto name = d.find("name");
    if (name == d.end() || !name->is_string() || name->get<std::string>().empty())
      wire_fail(where + ": needs a non-empty string \"name\"");
    a.name = name->get<std::string>();
    if (m.has(a.name)) wire_fail(where + ": name '" + a.name + "' appears twice");
    auto dtype = d.find("dtype");
    if (dtype == d.end() || !dtype->is_string() || !parse_dtype(dtype->get<std::string>(), a.dtype))
      wire_fail(where + " '" + a.name + "': \"dtype\" must be one of u8, i32, i64, f32, f64");
    auto shape = d.find("shape");
    if (shape == d.end() || !shape->is_array()) wire_fail(where + " '" + a.name + "': needs a list \"shape\"");
    if (static_cast<int64_t>(shape->size()) > limits.max_dims)
      wire_fail(where + " '" + a.name + "': " + std::to_string(shape->size()) + " dimensions, the maximum is " +
                std::to_string(limits.max_dims));
    // Sizes are bounded one by one so their product cannot overflow before it is compared.
    int64_t numel = 1;
    for (const Json& dim : *shape) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0 || dim.get<int64_t>() > limits.max_message_bytes)
        wire_fail(where + " '" + a.name + "': shape entries must be integers in [0, " +
                  std::to_string(limits.max_message_bytes) + "], got " + dim.dump());
      a.shape.push_back(dim.get<int64_t>());
      numel = a.shape.back() == 0 ? 0 : numel * a.shape.back();
      if (numel > limits.max_message_bytes)
        wire_fail(where + " '" + a.name + "': shape " + shape->dump() + " exceeds the message size limit");
    }
    const int64_t expected = numel * static_cast<int64_t>(wire_dtype_size(a.dtype));
    const int64_t got = static_cast<int64_t>(frames[i + 1].size());
    if (got != expected)
      wire_fail(where + " '" + a.name + "': frame has " + std::to_string(got) + " bytes, shape " + shape->dump() +
                " of " + wire_dtype_name(a.dtype) + " needs " + std::to_string(expected));
    a.bytes.assign(static_cast<const char*>(frames[i + 1].data()), frames[i + 1].size());
    m.arrays.push_back(std::move(a));
  }
  return m;
}

bool receive_frames(zmq::socket_t& socket, int envelope_frames, const WireLimits& limits, long timeout_ms,
                    ReceivedFrames& out) {
  out.envelope.clear();
  out.frames.clear();
  out.error.clear();
  out.bytes = 0;
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return false;
  int64_t count = 0;
  bool more = true;
  while (more) {
    zmq::message_t frame;
    (void)socket.recv(frame, zmq::recv_flags::none);
    more = frame.more();
    ++count;
    out.bytes += static_cast<int64_t>(frame.size());
    if (count <= envelope_frames) {
      out.envelope.push_back(std::move(frame));
      continue;
    }
    if (!out.error.empty()) continue;  // draining a message already rejected
    if (count > limits.max_frames() + envelope_frames) {
      out.error = "message has more than " + std::to_string(limits.max_frames()) + " frames";
    } else if (out.bytes > limits.max_message_bytes) {
      out.error = "message exceeds the maximum of " + std::to_string(limits.max_message_bytes) + " bytes";
    }
    if (out.error.empty()) {
      out.frames.push_back(std::move(frame));
    } else {
      out.frames.clear();
    }
  }
  if (out.error.empty() && count <= envelope_frames) out.error = "message has no header frame";
  if (!out.error.empty() && out.bytes > limits.max_message_bytes)
    out.error = "message of " + std::to_string(out.bytes) + " bytes exceeds the maximum of " +
                std::to_string(limits.max_message_bytes);
  return true;
}

bool send_wire_message(zmq::socket_t& socket, const std::vector<zmq::message_t>& envelope,
                       const WireMessage& message, bool dont_wait) {
  std::vector<zmq::message_t> frames;
  for (const auto& e : envelope) frames.emplace_back(e.data(), e.size());
  for (auto& f : encode_wire_message(message)) frames.push_back(std::move(f));
  // Once the first part is queued ZeroMQ takes the rest, so only the first send may fail.
  const zmq::send_flags first = dont_wait ? zmq::send_flags::dontwait : zmq::send_flags::none;
  for (size_t i = 0; i < frames.size(); ++i) {
    zmq::send_flags flags = i == 0 ? first : zmq::send_flags::none;
    if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
    if (!socket.send(frames[i], flags)) return false;
  }
  return true;
}

void bind_endpoint(zmq::socket_t& socket, const std::string& endpoint, const std::string& who) {
  try {
    socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    const std::string reason = e.num() == EADDRINUSE ? std::string("address in use") : e.what();
    RLCPP_FAIL(who << ": cannot listen on " << endpoint << ": " << reason);
  }
}

}  // namespace rlcpp
