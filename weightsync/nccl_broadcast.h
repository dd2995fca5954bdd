// The NCCL side of the `nccl` weight-sync transport (weightsync/zmq_channel.h carries its control messages):
// one NCCL world of the trainer (rank 0) and its rollout workers (ranks 1..N, each on a GPU of its own: two
// NCCL ranks cannot share one), formed from an ncclUniqueId the trainer sends over ZeroMQ, and the weights
// broadcast from rank 0 in buckets. Both the joining and each broadcast fail fast: what does not finish within
// the timeout aborts the communicator and throws naming who was waited for (a hung NCCL sync is the most
// reported weight-sync failure of TRL, verl and SGLang). Built from weightsync/cuda/nccl_broadcast.cpp where
// CUDA and NCCL are; elsewhere (weightsync/nccl_unavailable.cpp) every call throws saying so.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/exec_context.h"

namespace rlcpp {

class NcclWeightBroadcast {
 public:
  // A fresh ncclUniqueId's bytes: made by rank 0, sent to every other rank.
  static std::string unique_id();
  // What a wait calls between its polls: throws when the wait is known to be in vain (rank 0: a worker refused
  // the join or the announcement over zmq, so it will never take part); the communicator is then aborted and
  // the error passed on.
  using WhileWaiting = std::function<void()>;
  // Joins world `id` as `rank` of `world` on ctx's GPU; returns when every rank has joined, throws past
  // `timeout_s` (the communicator aborted).
  NcclWeightBroadcast(const ExecContext& ctx, const std::string& id, int rank, int world, double timeout_s,
                      const WhileWaiting& while_waiting = {});
  ~NcclWeightBroadcast();
  NcclWeightBroadcast(const NcclWeightBroadcast&) = delete;
  NcclWeightBroadcast& operator=(const NcclWeightBroadcast&) = delete;

  // `n` floats at `data` (on ctx's GPU) from rank 0 to every rank, in buckets of at most `bucket_floats`, on
  // ctx's stream; returns when they have arrived here. Past the timeout the communicator is aborted and the
  // error names `waiting_for` (who stopped answering); the object is then unusable.
  void broadcast(float* data, int64_t n, int64_t bucket_floats, const std::string& waiting_for,
                 const WhileWaiting& while_waiting = {});
  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  struct Comm;
  std::unique_ptr<Comm> comm_;
  int rank_ = 0, world_ = 1;
};

// Whether this build and machine can form a world (CUDA, NCCL and a GPU); `why` says what is missing.
bool nccl_weight_sync_available(std::string* why = nullptr);

}  // namespace rlcpp
