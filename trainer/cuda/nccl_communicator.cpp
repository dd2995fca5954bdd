// The "nccl" backend (trainer/nccl_communicator.h), built where CUDA and NCCL are (RLCPP_WITH_NCCL).
#if defined(RLCPP_WITH_NCCL)

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/metrics.h"
#include "trainer/nccl_communicator.h"

namespace rlcpp {

namespace {

void check_cuda(cudaError_t e, const char* what) {
  RLCPP_CHECK(e == cudaSuccess, "CUDA: " << what << " failed: " << cudaGetErrorString(e));
}
void check_nccl(ncclResult_t r, const char* what) {
  RLCPP_CHECK(r == ncclSuccess || r == ncclInProgress, "NCCL: " << what << " failed: " << ncclGetErrorString(r));
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> bootstrap, int local_rank, double timeout_s)
      : bootstrap_(std::move(bootstrap)), timeout_s_(timeout_s) {
    int devices = 0;
    check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    RLCPP_CHECK(devices > 0, "NCCL: rank " << rank() << " sees no GPU");
    check_cuda(cudaSetDevice(local_rank % devices), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Rank 0's id to every rank over the bootstrap (MPI).
    ncclUniqueId id;
    if (rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::string bytes(reinterpret_cast<const char*>(&id), sizeof id);
    bootstrap_->broadcast(bytes, 0);
    RLCPP_CHECK(bytes.size() == sizeof id, "NCCL: the id broadcast by rank 0 has " << bytes.size() << " bytes");
    std::memcpy(&id, bytes.data(), sizeof id);
    check_nccl(ncclCommInitRank(&comm_, size(), id, rank()), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      if (aborted_)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    if (device_ != nullptr) cudaFree(device_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return bootstrap_->rank(); }
  int size() const override { return bootstrap_->size(); }
  std::string backend() const override { return "nccl"; }

  // Copies the floats to the GPU, sums them there and copies them back, all queued on the stream in order.
  void start_all_reduce(float* data, int64_t n) override {
    if (used_ + n > capacity_) {  // a larger staging buffer: whatever is queued on the old one finishes first
      wait_all();
      if (device_ != nullptr) check_cuda(cudaFree(device_), "cudaFree");
      capacity_ = std::max<int64_t>(n, 2 * capacity_);
      check_cuda(cudaMalloc(&device_, static_cast<size_t>(capacity_) * sizeof(float)), "cudaMalloc");
    }
    float* staged = device_ + used_;
    used_ += n;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    check_cuda(cudaMemcpyAsync(staged, data, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to GPU)");
    check_nccl(ncclAllReduce(staged, staged, static_cast<size_t>(n), ncclFloat, ncclSum, comm_, stream_),
               "ncclAllReduce");
    check_cuda(cudaMemcpyAsync(data, staged, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to host)");
  }
  void start_all_gather(const float*, int64_t, float*) override {
    RLCPP_FAIL("NCCL: the ordered gradient sum (trainer.grad_shards) runs over the mpi backend only");
  }
  void progress() override {}
  // Waits for the stream, polling NCCL's own error; past timeout_s the communicator is aborted.
  void wait_all() override {
    Stopwatch waited;
    for (;;) {
      const cudaError_t state = cudaStreamQuery(stream_);
      if (state == cudaSuccess) break;
      RLCPP_CHECK(state == cudaErrorNotReady, "CUDA: rank " << rank() << ": the all-reduce stream failed: "
                                                            << cudaGetErrorString(state));
      ncclResult_t async = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress) {
        aborted_ = true;
        RLCPP_FAIL("NCCL: rank " << rank() << ": the all-reduce failed: " << ncclGetErrorString(async));
      }
      if (timeout_s_ > 0 && waited.seconds() > timeout_s_) {
        aborted_ = true;
        RLCPP_FAIL("NCCL: rank " << rank() << " of " << size() << ": the gradient all-reduce did not finish within "
                                 << timeout_s_ << " s (trainer.collective_timeout_s: another rank stopped "
                                 << "answering); the communicator is aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    used_ = 0;
  }
  void broadcast(std::string& bytes, int root) override { bootstrap_->broadcast(bytes, root); }
  std::vector<std::string> all_gather(const std::string& bytes) override { return bootstrap_->all_gather(bytes); }
  void set_timeout_s(double seconds) override {
    timeout_s_ = seconds;
    bootstrap_->set_timeout_s(seconds);
  }
  double timeout_s() const override { return timeout_s_; }

 private:
  std::unique_ptr<Communicator> bootstrap_;
  double timeout_s_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  float* device_ = nullptr;  // staging for the buckets in flight, one after another
  int64_t capacity_ = 0, used_ = 0;
  bool aborted_ = false;
};

}  // namespace

int nccl_devices(std::string* why) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) return devices;
  if (why) *why = e != cudaSuccess ? std::string("no usable CUDA device: ") + cudaGetErrorString(e) : "no GPU";
  return 0;
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap, int local_rank,
                                                     double timeout_s) {
  std::string why;
  RLCPP_CHECK(nccl_devices(&why) > 0, "launch: data-parallel backend nccl: " << why);
  return std::make_unique<NcclCommunicator>(std::move(bootstrap), local_rank, timeout_s);
}

}  // namespace rlcpp

#endif  // RLCPP_WITH_NCCL
