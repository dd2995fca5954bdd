// weightsync/nccl_broadcast.h with CUDA and NCCL (RLCPP_WITH_NCCL): a non-blocking communicator
// (ncclConfig_t.blocking = 0), so that joining and every broadcast are polled against the timeout and aborted
// past it instead of hanging.
#if defined(RLCPP_WITH_NCCL)

#include "weightsync/nccl_broadcast.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/metrics.h"

namespace rlcpp {

namespace {

void check_cuda(cudaError_t e, const char* what) {
  RLCPP_CHECK(e == cudaSuccess, "nccl weight sync: " << what << ": CUDA error " << cudaGetErrorString(e));
}

}  // namespace

struct NcclWeightBroadcast::Comm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  double timeout_s = 0;
  bool aborted = false;
  Stopwatch since_check;  // since check_others last called its WhileWaiting

  // while_waiting() between polls; what it throws aborts the communicator first.
  // At most every 5 ms: the polls below come every 50 us, and a worker's refusal needs no faster answer.
  void check_others(const WhileWaiting& while_waiting, const std::string& what) {
    if (!while_waiting || since_check.seconds() < 0.005) return;
    since_check.reset();
    try {
      while_waiting();
    } catch (const std::exception& e) {
      fail(what + ": " + e.what());
    }
  }
  // Polls the communicator until its last call is no longer in progress; past `timeout_s` aborts it.
  void settle(double timeout_s, const std::string& what, const WhileWaiting& while_waiting = {}) {
    Stopwatch waited;
    for (;;) {
      check_others(while_waiting, what);
      ncclResult_t state = ncclSuccess;
      const ncclResult_t got = ncclCommGetAsyncError(comm, &state);
      if (got != ncclSuccess) state = got;
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(what + ": " + ncclGetErrorString(state));
      if (waited.seconds() > timeout_s) fail(what + " did not finish within " + std::to_string(timeout_s) + " s");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  [[noreturn]] void fail(const std::string& why) {
    abort();
    RLCPP_FAIL("nccl weight sync: " << why << "; the communicator is aborted");
  }
  void abort() {
    if (comm != nullptr && !aborted) ncclCommAbort(comm);
    aborted = true;
  }
};

bool nccl_weight_sync_available(std::string* why) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) return true;
  cudaGetLastError();
  if (why) *why = e != cudaSuccess ? std::string("no usable CUDA device: ") + cudaGetErrorString(e) : "no GPU";
  return false;
}

std::string NcclWeightBroadcast::unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  RLCPP_CHECK(r == ncclSuccess, "nccl weight sync: ncclGetUniqueId: " << ncclGetErrorString(r));
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

NcclWeightBroadcast::NcclWeightBroadcast(const ExecContext& ctx, const std::string& id, int rank, int world,
                                         double timeout_s, const WhileWaiting& while_waiting)
    : comm_(std::make_unique<Comm>()), rank_(rank), world_(world) {
  comm_->timeout_s = timeout_s;
  RLCPP_CHECK(ctx.device() == Device::kCUDA,
              "nccl weight sync: rank " << rank << " computes on " << ctx.name() << "; NCCL moves GPU memory");
  RLCPP_CHECK(id.size() == sizeof(ncclUniqueId),
              "nccl weight sync: an id of " << id.size() << " bytes, expected " << sizeof(ncclUniqueId));
  RLCPP_CHECK(world >= 1 && rank >= 0 && rank < world, "nccl weight sync: rank " << rank << " of " << world);
  comm_->device = ctx.device_index();
  comm_->stream = static_cast<cudaStream_t>(ctx.stream());
  check_cuda(cudaSetDevice(comm_->device), "cudaSetDevice");
  ncclUniqueId unique;
  std::memcpy(&unique, id.data(), sizeof unique);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_->comm, world, unique, rank, &config);
  // A constructor that throws runs no destructor: fail() aborts a communicator the call may have made.
  if (r != ncclSuccess && r != ncclInProgress)
    comm_->fail("rank " + std::to_string(rank) + " of " + std::to_string(world) +
                ": ncclCommInitRankConfig: " + ncclGetErrorString(r));
  comm_->settle(timeout_s,
                "rank " + std::to_string(rank) + " of " + std::to_string(world) +
                    ": joining the weight-sync world (every rank must join)",
                while_waiting);
}

NcclWeightBroadcast::~NcclWeightBroadcast() {
  if (comm_->comm == nullptr) return;
  cudaSetDevice(comm_->device);
  comm_->abort();  // between syncs nothing is in flight; an abort frees it without waiting on the other ranks
}

void NcclWeightBroadcast::broadcast(float* data, int64_t n, int64_t bucket_floats, const std::string& waiting_for,
                                    const WhileWaiting& while_waiting) {
  RLCPP_CHECK(!comm_->aborted, "nccl weight sync: the communicator was aborted by an earlier failure");
  RLCPP_CHECK(bucket_floats > 0, "nccl weight sync: buckets of " << bucket_floats << " floats");
  check_cuda(cudaSetDevice(comm_->device), "cudaSetDevice");
  const std::string who = "rank " + std::to_string(rank_) + " of " + std::to_string(world_);
  for (int64_t begin = 0; begin < n; begin += bucket_floats) {
    const int64_t count = std::min(bucket_floats, n - begin);
    const ncclResult_t r = ncclBroadcast(data + begin, data + begin, static_cast<size_t>(count), ncclFloat, 0,
                                         comm_->comm, comm_->stream);
    if (r != ncclSuccess && r != ncclInProgress) comm_->fail(who + ": ncclBroadcast: " + ncclGetErrorString(r));
    comm_->settle(comm_->timeout_s, who + ": enqueueing the broadcast", while_waiting);
  }
  Stopwatch waited;
  for (;;) {
    const cudaError_t state = cudaStreamQuery(comm_->stream);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) comm_->fail(who + ": the broadcast's stream failed: " + cudaGetErrorString(state));
    comm_->check_others(while_waiting, who + ": the broadcast");
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress)
      comm_->fail(who + ": the broadcast failed: " + ncclGetErrorString(async));
    if (waited.seconds() > comm_->timeout_s)
      comm_->fail(who + ": the broadcast of " + std::to_string(n) + " floats did not finish within " +
                  std::to_string(comm_->timeout_s) + " s (waiting for " + waiting_for + ")");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace rlcpp

#endif  // RLCPP_WITH_NCCL
