// A weight publish as one wire message (core/wire.h): the header carries the version, the layout (every
// parameter's name, shape and offset, in floats), the total size and an XXH3-64 checksum of the flat fp32
// buffer's bytes; the arrays are the buffer cut into chunks of at most `chunk_floats` floats, in order.
// The receiver checks all of it against the layout it expects before any byte reaches live weights.
#pragma once

#include <cstdint>
#include <vector>

#include "core/wire.h"
#include "model/parameters.h"

namespace rlcpp {

// XXH3-64 of `n` floats' bytes.
uint64_t weight_checksum(const float* data, int64_t n);
uint64_t weight_checksum(const ParameterStore& params);

// The parameters' layout as JSON: [{"name", "shape", "offset"}, ...].
Json layout_json(const std::vector<ParameterInfo>& layout);

// `first`, then `then` with its offsets moved past `first`'s floats: the layout of a LoRA base message (the
// model's parameters, then the adapters': weightsync/zmq_channel.h).
std::vector<ParameterInfo> concatenated_layout(std::vector<ParameterInfo> first, const std::vector<ParameterInfo>& then);
// The floats a store of `layout` holds (its last parameter's end).
int64_t layout_floats(const std::vector<ParameterInfo>& layout);

// Encodes `params` as a "weights" message for `version`; chunk_floats > 0.
WireMessage encode_weights(const ParameterStore& params, int64_t version, int64_t chunk_floats);

// Wire limits that admit a publish of `total_floats` in chunks of `chunk_floats`.
WireLimits weights_limits(int64_t total_floats, int64_t chunk_floats);

// The part of a "weights" message every transport shares — its type, version, total_floats and layout (names,
// shapes, offsets) — checked against what the receiver expects. Returns the version; throws WireError naming the
// first mismatch.
int64_t check_weights_header(const WireMessage& message, const std::vector<ParameterInfo>& expected,
                             int64_t total_floats);
// Throws WireError("weights message refused: WHAT").
[[noreturn]] void refuse_weights(const std::string& what);
// Header field `key` of a weights-sync message as a T; WireError naming it when absent or of another type.
template <class T> T weights_header_field(const Json& header, const char* key) {
  if (!header.contains(key)) refuse_weights(std::string("header has no '") + key + "'");
  try {
    return header.at(key).get<T>();
  } catch (const std::exception&) {
    refuse_weights(std::string("header field '") + key + "' has the wrong type: " + header.at(key).dump());
  }
}
inline std::string weights_header_text(const Json& header, const char* key) {
  return weights_header_field<std::string>(header, key);
}
// The checks of weights that arrived on ctx's device (cuda-ipc, nccl): their keyed checksum (ops::keyed_checksum)
// equals the announced `checksum` and every weight is finite; WireError naming the transport and the first
// failure (the non-finite tensor by name).
void check_device_copy(const ExecContext& ctx, const ParameterStore& copy, const std::string& checksum,
                       int64_t version, const std::string& transport);

// Checks `message` against `expected` (names, shapes, offsets, total size, chunk sizes, checksum) and copies
// its floats into `out` (numel = the layout's total). Throws WireError naming the first mismatch, or the first
// tensor holding a NaN or an infinity.
// Returns the message's version.
int64_t decode_weights(const WireMessage& message, const std::vector<ParameterInfo>& expected, int64_t total_floats,
                       float* out);

}  // namespace rlcpp
