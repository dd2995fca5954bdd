#include "weightsync/weight_message.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "model/finite_weights.h"
#include "model/weight_checksum.h"

namespace rlcpp {

uint64_t weight_checksum(const float* data, int64_t n) {
  return XXH3_64bits(data, static_cast<size_t>(n) * sizeof(float));
}

uint64_t weight_checksum(const ParameterStore& params) {
  return weight_checksum(params.flat().data<float>(), params.numel());
}

Json layout_json(const std::vector<ParameterInfo>& layout) {
  Json out = Json::array();
  for (const ParameterInfo& p : layout) out.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}});
  return out;
}

int64_t layout_floats(const std::vector<ParameterInfo>& layout) {
  int64_t floats = 0;
  for (const ParameterInfo& p : layout) floats = std::max(floats, p.offset + p.numel());
  return floats;
}

std::vector<ParameterInfo> concatenated_layout(std::vector<ParameterInfo> first, const std::vector<ParameterInfo>& then) {
  const int64_t end = layout_floats(first);
  for (ParameterInfo p : then) {
    p.offset += end;
    first.push_back(std::move(p));
  }
  return first;
}

WireMessage encode_weights(const ParameterStore& params, int64_t version, int64_t chunk_floats) {
  RLCPP_CHECK(chunk_floats > 0, "weight sync chunk_floats must be > 0, got " << chunk_floats);
  const int64_t total = params.numel();
  const float* data = params.flat().data<float>();
  WireMessage m("weights");
  m.header["version"] = version;
  m.header["total_floats"] = total;
  m.header["chunk_floats"] = chunk_floats;
  // As a decimal string: JSON numbers above 2^53 do not survive every parser.
  m.header["checksum"] = std::to_string(weight_checksum(data, total));
  m.header["layout"] = layout_json(params.infos());
  for (int64_t begin = 0, i = 0; begin < total; begin += chunk_floats, ++i) {
    const int64_t n = std::min(chunk_floats, total - begin);
    WireArray a;
    a.name = "chunk_" + std::to_string(i);
    a.dtype = WireDType::kF32;
    a.shape = {n};
    a.bytes.assign(reinterpret_cast<const char*>(data + begin), static_cast<size_t>(n) * sizeof(float));
    m.arrays.push_back(std::move(a));
  }
  return m;
}

WireLimits weights_limits(int64_t total_floats, int64_t chunk_floats) {
  WireLimits limits;
  const int64_t chunks = (total_floats + chunk_floats - 1) / chunk_floats;
  limits.max_arrays = std::max<int64_t>(chunks, 1);
  limits.max_message_bytes = total_floats * 4 + (int64_t{64} << 20);  // floats + a generous header
  limits.max_header_bytes = int64_t{64} << 20;
  return limits;
}

namespace {

[[noreturn]] void refuse(const std::string& what) { throw WireError("weights message refused: " + what); }

template <class T> T header_field(const Json& header, const char* key) { return weights_header_field<T>(header, key); }

void check_layout(const Json& got, const std::vector<ParameterInfo>& expected) {
  if (!got.is_array()) refuse("'layout' is not an array");
  if (got.size() != expected.size())
    refuse("layout has " + std::to_string(got.size()) + " parameters, expected " + std::to_string(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const ParameterInfo& e = expected[i];
    const Json& g = got[i];
    const std::string name = g.value("name", std::string());
    if (name != e.name) refuse("parameter " + std::to_string(i) + " is '" + name + "', expected '" + e.name + "'");
    if (!g.contains("shape") || g["shape"] != Json(e.shape))
      refuse("parameter '" + e.name + "' has shape " + g.value("shape", Json()).dump() + ", expected " +
             shape_str(e.shape));
    if (g.value("offset", int64_t{-1}) != e.offset)
      refuse("parameter '" + e.name + "' has offset " + g.value("offset", Json()).dump() + ", expected " +
             std::to_string(e.offset));
  }
}

}  // namespace

int64_t check_weights_header(const WireMessage& message, const std::vector<ParameterInfo>& expected,
                             int64_t total_floats) {
  if (message.type() != "weights") refuse("type is '" + message.type() + "', expected 'weights'");
  const Json& h = message.header;
  const auto version = header_field<int64_t>(h, "version");
  const auto total = header_field<int64_t>(h, "total_floats");
  if (total != total_floats)
    refuse("total_floats " + std::to_string(total) + ", expected " + std::to_string(total_floats));
  if (!h.contains("layout")) refuse("header has no 'layout'");
  check_layout(h["layout"], expected);
  return version;
}

void refuse_weights(const std::string& what) { refuse(what); }

void check_device_copy(const ExecContext& ctx, const ParameterStore& copy, const std::string& checksum,
                       int64_t version, const std::string& transport) {
  const std::string refused = "(" + transport + ") ";
  const uint64_t got = weights_keyed_checksum(ctx, copy.flat());
  if (std::to_string(got) != checksum)
    refuse(refused + "checksum mismatch for version " + std::to_string(version) + ": header " + checksum +
           ", the copy " + std::to_string(got));
  if (const auto bad = find_non_finite(ctx, copy))  // intact but diverged
    refuse(refused + "version " + std::to_string(version) + " has non-finite weights: " + bad->describe());
}

int64_t decode_weights(const WireMessage& message, const std::vector<ParameterInfo>& expected, int64_t total_floats,
                       float* out) {
  const int64_t version = check_weights_header(message, expected, total_floats);
  const Json& h = message.header;
  const int64_t total = total_floats;
  const auto chunk = header_field<int64_t>(h, "chunk_floats");
  const auto checksum_text = header_field<std::string>(h, "checksum");
  if (chunk <= 0) refuse("chunk_floats " + std::to_string(chunk) + ", expected > 0");
  const int64_t chunks = (total + chunk - 1) / chunk;
  if (static_cast<int64_t>(message.arrays.size()) != chunks)
    refuse("has " + std::to_string(message.arrays.size()) + " chunks, expected " + std::to_string(chunks) +
           " (message cut short?)");
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t begin = i * chunk;
    const int64_t n = std::min(chunk, total - begin);
    const std::string name = "chunk_" + std::to_string(i);
    const WireArray& a = message.array(name);  // the codec has checked bytes == numel * dtype size
    if (a.dtype != WireDType::kF32 || a.numel() != n)
      refuse(name + " has " + std::to_string(a.numel()) + " " + wire_dtype_name(a.dtype) + " elements, expected " +
             std::to_string(n) + " f32");
    std::memcpy(out + begin, a.bytes.data(), static_cast<size_t>(n) * sizeof(float));
  }
  const uint64_t got = weight_checksum(out, total);
  if (std::to_string(got) != checksum_text)
    refuse("checksum mismatch for version " + std::to_string(version) + ": header " + checksum_text +
           ", payload " + std::to_string(got));
  // Intact but diverged (the publisher's weights overflowed): refused before it reaches the engine.
  if (const auto bad = find_non_finite(expected, out))
    refuse("version " + std::to_string(version) + " has non-finite weights: " + bad->describe());
  return version;
}

}  // namespace rlcpp
