// The `cuda-ipc` weight-sync transport (one host, GPU to GPU: two processes sharing one GPU, or a subscriber on
// another GPU of the host, copying peer to peer). The zmq channel's messages and replies
// (weightsync/zmq_channel.h: versions, the layout check, acknowledgement, retries, timeouts) carry, in place of
// the weights' bytes, a CUDA IPC handle of the publisher's export buffer, the UUID of the GPU it is on, the
// host's boot id and the weights' keyed checksum (ops::keyed_checksum, computed on that GPU). The subscriber
// maps the buffer once per handle, copies it device to device into a fresh store on its own GPU,
// checks the checksum and that every weight is finite on that copy, and only then swaps and acknowledges. The
// publisher stages the next version into its buffer only after every subscriber acknowledged the last one (its
// publish returns on the acknowledgement), so no reader copies a half-written version.
//
// The export buffer is a device copy of the weights (one allocation of its own: an IPC handle names a whole
// cudaMalloc allocation), so the trainer may update its own while a subscriber copies.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/exec_context.h"
#include "core/wire.h"
#include "model/parameters.h"

namespace rlcpp {

class CudaIpcWeightExport {
 public:
  // A buffer for the weights of `config` on `ctx`'s GPU (a CUDA context; a host one is refused, saying so).
  CudaIpcWeightExport(const ExecContext& ctx, const ModelConfig& config);
  // Copies `weights` (on ctx's GPU) into the buffer and returns the message announcing them as `version`.
  WireMessage stage(const ParameterStore& weights, int64_t version);
  // The message announcing the buffer's content (the last version staged) again: for a restarted subscriber.
  WireMessage announce() const;
  int64_t staged_version() const { return staged_version_; }

 private:
  ExecContext ctx_;
  std::vector<ParameterInfo> layout_;
  int64_t total_floats_ = 0;
  std::shared_ptr<void> allocation_;
  Tensor buffer_;  // the allocation as floats
  std::string handle_, device_uuid_, checksum_;  // the IPC handle's bytes
  int64_t staged_version_ = -1;
};

class CudaIpcWeightImport {
 public:
  // Weights arrive on `ctx`'s GPU.
  explicit CudaIpcWeightImport(const ExecContext& ctx);
  // Checks `message` — layout, size, the host and a GPU this process sees, the checksum and finiteness of the
  // copy — and returns the
  // weights it announces in a fresh store of `config` from ctx's pool, setting *version. Throws WireError naming
  // the first mismatch (a failed mapping or copy: its CUDA error).
  ParameterStore receive(const WireMessage& message, const ModelConfig& config, int64_t* version);

 private:
  ExecContext ctx_;
  std::string mapped_handle_;  // the IPC handle of the mapping below
  std::shared_ptr<void> mapped_;
  std::map<std::string, int> device_of_uuid_;  // an export's GPU UUID -> its index here (-1: not visible)
};

// Whether a "weights" message announces a cuda-ipc export rather than carrying the bytes.
bool is_cuda_ipc_message(const WireMessage& message);

}  // namespace rlcpp
