// Hugging Face safetensors files: an 8-byte little-endian u64 header length N, N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>"}}
// (padded with spaces), then the byte buffer; offsets are in bytes from the start of the buffer.
//
// The reader checks everything a corrupt or hostile file could get wrong before it allocates or reads a
// tensor, so a bad file is an rlcpp::Error naming the file and the tensor, never a crash or a huge allocation.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace rlcpp {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // CPU tensors in their stored dtype
  std::map<std::string, std::string> metadata;
};

// Dtypes: F32, F16, BF16, I32, I64, U8. Others (F64, BOOL, ...) are rejected naming the tensor.
SafetensorsFile read_safetensors(const std::string& path);

// Writes the tensors in the given order, contiguous, header padded with spaces so the buffer starts on an
// 8-byte boundary. Written to a temporary file, synced, then renamed over `path`, so a crash leaves either
// the old file or the new one. Tensors must be CPU; names must be unique and not "__metadata__".
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// "F32" -> DType::kF32, ...; throws naming `where` for a dtype outside the supported set.
DType safetensors_dtype(const std::string& name, const std::string& where);

}  // namespace rlcpp
