#include "model/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <set>

#include "core/config.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"

namespace rlcpp {

// The header length and the tensor bytes are stored little-endian; we copy them without swapping.
static_assert(std::endian::native == std::endian::little, "safetensors IO assumes a little-endian host");

namespace {

// The reference implementation's limit; a larger header is a corrupt length, not a real file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// A non-negative JSON integer as u64; false for anything else (negative, fractional, string, ...).
bool json_u64(const Json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& e, uint64_t buffer_bytes) {
  const std::string where = path + ": tensor '" + name + "'";
  RLCPP_CHECK(e.is_object(), where << ": header entry is " << e.dump() << ", expected an object with dtype, shape "
                                   << "and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    RLCPP_CHECK(e.contains(key), where << ": header entry has no '" << key << "'");
  Entry out;
  out.name = name;
  RLCPP_CHECK(e["dtype"].is_string(), where << ": dtype is " << e["dtype"].dump() << ", expected a string");
  out.dtype = safetensors_dtype(e["dtype"].get<std::string>(), where);

  const Json& shape = e["shape"];
  RLCPP_CHECK(shape.is_array(), where << ": shape is " << shape.dump() << ", expected an array of integers");
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t d = 0;
    RLCPP_CHECK(json_u64(shape[i], d) && d <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                where << ": shape " << shape.dump() << " has dimension " << shape[i].dump()
                      << ", expected a non-negative integer");
    out.shape.push_back(static_cast<int64_t>(d));
    has_zero = has_zero || d == 0;
  }
  // Element count without overflow: a product past the buffer cannot be a valid tensor anyway.
  uint64_t numel = has_zero ? 0 : 1;
  if (!has_zero)
    for (int64_t d : out.shape) {
      RLCPP_CHECK(numel <= buffer_bytes / static_cast<uint64_t>(d),
                  where << ": shape " << shape_str(out.shape) << " holds more elements than the file's "
                        << buffer_bytes << "-byte data buffer");
      numel *= static_cast<uint64_t>(d);
    }

  const Json& offs = e["data_offsets"];
  RLCPP_CHECK(offs.is_array() && offs.size() == 2 && json_u64(offs[0], out.begin) && json_u64(offs[1], out.end),
              where << ": data_offsets is " << offs.dump() << ", expected [begin, end] with non-negative integers");
  RLCPP_CHECK(out.begin <= out.end, where << ": data_offsets [" << out.begin << ", " << out.end
                                          << "] has end before begin");
  RLCPP_CHECK(out.end <= buffer_bytes, where << ": data_offsets [" << out.begin << ", " << out.end
                                             << "] reach past the end of the " << buffer_bytes
                                             << "-byte data buffer (file truncated?)");
  const uint64_t expected = numel * dtype_size(out.dtype);
  RLCPP_CHECK(out.end - out.begin == expected,
              where << ": data_offsets [" << out.begin << ", " << out.end << "] span " << out.end - out.begin
                    << " bytes but shape " << shape_str(out.shape) << " of " << dtype_name(out.dtype) << " needs "
                    << expected);
  return out;
}

// Rejects tensors whose byte ranges share bytes (empty tensors overlap nothing at the ends of a range).
// The tensors' byte ranges tile the data buffer, as the format requires (the reference reader refuses the rest):
// no overlap, no gap, nothing after the last one — bytes no tensor owns mean a damaged or spliced file.
void check_layout(const std::string& path, std::vector<const Entry*> entries, uint64_t buffer_bytes) {
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  const Entry* reach = nullptr;  // the entry with the largest end so far
  for (const Entry* e : entries) {
    if (reach && e->begin < reach->end && e->begin != e->end)
      RLCPP_FAIL(path << ": tensor '" << e->name << "' bytes [" << e->begin << ", " << e->end
                      << ") overlap tensor '" << reach->name << "' bytes [" << reach->begin << ", " << reach->end
                      << ")");
    if (e->begin != e->end) {
      const uint64_t covered = reach ? reach->end : 0;
      RLCPP_CHECK(e->begin <= covered, path << ": bytes [" << covered << ", " << e->begin << ") of the data buffer "
                                            << "belong to no tensor (before tensor '" << e->name << "')");
    }
    if (!reach || e->end > reach->end) reach = e;
  }
  const uint64_t covered = reach ? reach->end : 0;
  RLCPP_CHECK(covered == buffer_bytes, path << ": " << buffer_bytes - covered << " bytes after the last tensor's data "
                                            << "belong to no tensor (a damaged or appended-to file)");
}

}  // namespace

DType safetensors_dtype(const std::string& name, const std::string& where) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kU8})
    if (name == dtype_name(d)) return d;
  RLCPP_FAIL(where << ": dtype '" << name << "' is not supported (expected F32, F16, BF16, I32, I64 or U8)");
}

SafetensorsFile read_safetensors(const std::string& path) {
  const InputFile in(path, kWeightsInput);
  const uint64_t file_bytes = in.size();
  RLCPP_CHECK(file_bytes >= 8, path << ": file is " << file_bytes
                                    << " bytes, shorter than the 8-byte safetensors header length");

  uint64_t header_bytes = 0;
  in.read_at(0, &header_bytes, 8);
  RLCPP_CHECK(header_bytes <= kMaxHeaderBytes, path << ": header length " << header_bytes << " exceeds the "
                                                    << kMaxHeaderBytes << "-byte limit (not a safetensors file?)");
  RLCPP_CHECK(header_bytes <= file_bytes - 8,
              path << ": header length " << header_bytes << " reaches past the end of the " << file_bytes
                   << "-byte file");
  std::string header(header_bytes, '\0');
  in.read_at(8, header.data(), header.size());
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t buffer_bytes = file_bytes - data_start;

  Json j;
  try {
    j = parse_json_limited(header);
  } catch (const Json::exception& e) {
    RLCPP_FAIL(path << ": header is not valid JSON: " << e.what());
  }
  RLCPP_CHECK(j.is_object(), path << ": header is " << j.type_name() << ", expected a JSON object");

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      RLCPP_CHECK(it->is_object(), path << ": __metadata__ is " << it->dump() << ", expected an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        RLCPP_CHECK(m->is_string(), path << ": __metadata__ key '" << m.key() << "' is " << m->dump()
                                         << ", expected a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, it.key(), *it, buffer_bytes));
  }
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  check_layout(path, by_offset, buffer_bytes);

  // Every range is checked, so reading in offset order allocates at most the file's size.
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (const Entry* e : by_offset) {
    Tensor t = Tensor::empty(e->shape, e->dtype);
    if (e->end > e->begin) in.read_at(data_start + e->begin, t.raw(), e->end - e->begin);
    out.tensors.emplace(e->name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the header in the caller's order, which is also the byte order of the buffer.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    RLCPP_CHECK(name != kMetadataKey, path << ": a tensor cannot be named '" << kMetadataKey << "'");
    RLCPP_CHECK(names.insert(name).second, path << ": tensor '" << name << "' given twice");
    RLCPP_CHECK(t.on_host(), path << ": tensor '" << name << "' is on " << device_name(t.device())
                                                 << "; copy it to the CPU before writing");
    RLCPP_CHECK(t.defined() || t.numel() == 0, path << ": tensor '" << name << "' has no data");
    header[name] = {{"dtype", dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    RLCPP_FAIL(path << ": cannot encode the header (tensor or metadata names must be UTF-8): " << e.what());
  }
  // Spaces up to a multiple of 8 so the buffer (at 8 + N) is 8-byte aligned for readers that map the file.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_bytes = text.size();

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  RLCPP_CHECK(f != nullptr, path << ": cannot create temporary file '" << tmp << "'");
  bool ok = std::fwrite(&header_bytes, 8, 1, f) == 1 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const auto& [name, t] : tensors)
    if (ok && t.nbytes() > 0) ok = std::fwrite(t.raw(), 1, t.nbytes(), f) == t.nbytes();
  ok = ok && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    RLCPP_FAIL(path << ": writing " << 8 + header_bytes + offset << " bytes to '" << tmp
                    << "' failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    RLCPP_FAIL(path << ": cannot rename '" << tmp << "' over it");
  }
}

}  // namespace rlcpp
