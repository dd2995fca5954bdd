// The `nccl` weight-sync transport (GPUs of any hosts; weightsync/nccl_broadcast.h does the NCCL part). The zmq
// channel (weightsync/zmq_channel.h) carries its control: once, a join per worker (the trainer's ncclUniqueId,
// the worker's rank, the world size and the timeout), which the worker answers after the world has formed;
// then per version an announcement (version, layout, the weights' keyed checksum, the bucket size) sent to
// every worker, the weights broadcast from the trainer's GPU (rank 0) into a fresh store on each worker's GPU,
// and each worker's acknowledgement once its copy's checksum and finiteness check out. A worker that stops
// answering fails the broadcast at the timeout, which aborts the communicator (weightsync/nccl_broadcast.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/exec_context.h"
#include "core/wire.h"
#include "model/parameters.h"
#include "weightsync/nccl_broadcast.h"

namespace rlcpp {

// The trainer's messages: the join of worker `rank` (1..world-1) to world `id`, and version `version`'s
// announcement for `weights` on ctx's GPU (their keyed checksum computed there) in buckets of `bucket_floats`.
WireMessage nccl_join_message(const std::string& id, int rank, int world, double timeout_s);
WireMessage nccl_weights_message(const ExecContext& ctx, const ParameterStore& weights, int64_t version,
                                 int64_t bucket_floats);
bool is_nccl_join_message(const WireMessage& message);
bool is_nccl_weights_message(const WireMessage& message);

// A worker's side: joins the world a join names, then receives each announced version.
class NcclWeightImport {
 public:
  explicit NcclWeightImport(const ExecContext& ctx);
  // Forms this worker's end of the world (returns once every rank joined); WireError naming why not.
  void join(const WireMessage& message);
  // Takes part in the broadcast of the version `message` announces, into a fresh store of `config` from ctx's
  // pool, and checks its checksum and finiteness; sets *version. WireError naming the first mismatch.
  ParameterStore receive(const WireMessage& message, const ModelConfig& config, int64_t* version);

 private:
  ExecContext ctx_;
  std::unique_ptr<NcclWeightBroadcast> world_;
};

}  // namespace rlcpp
