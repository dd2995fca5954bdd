// Data parallelism's collectives (docs/architecture.md "Scale-out"): N trainer ranks, each on a shard of the global
// batch, sum their gradients with an all-reduce of the launcher's engine — MPI on CPUs (OpenMPI, launched by mpirun
// or srun), NCCL on GPUs — never a collective of our own. One interface for both; a single process is the world of
// one, where every collective is the identity.
//
// Collectives are called by every rank in the same order, from the thread that created the communicator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/launch_env.h"

namespace rlcpp {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", "nccl"

  // Starts summing `n` floats at `data` in place over every rank (every rank gets the same bits); `data` must
  // stay untouched until wait_all. Reductions complete in the order started.
  virtual void start_all_reduce(float* data, int64_t n) = 0;
  // Starts gathering `n` floats from every rank into `out` (size() * n floats, rank r's at r * n); `data` and
  // `out` stay untouched until wait_all. The ordered gradient sum (trainer.grad_shards) adds them up itself.
  virtual void start_all_gather(const float* data, int64_t n, float* out) = 0;
  // Lets started reductions progress (called between pieces of other work, so they overlap it).
  virtual void progress() = 0;
  // Waits for every started reduction.
  virtual void wait_all() = 0;
  // `bytes` of rank `root` on every rank.
  virtual void broadcast(std::string& bytes, int root) = 0;
  // Every rank's `bytes`, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& bytes) = 0;

  // The longest wait in one collective, in seconds (config key trainer.collective_timeout_s; 0 = none). Past it
  // the waiting rank asks every other rank whether it is there (a rank waiting in a collective answers at once)
  // and throws naming those that do not answer: stopped, hung, or busy for longer than the deadline.
  virtual void set_timeout_s(double seconds) = 0;
  virtual double timeout_s() const = 0;
};

// trainer.collective_timeout_s's default: generous, as the other ranks wait through the lead's rollout, evaluation
// and checkpoint of each step.
inline constexpr double kDefaultCollectiveTimeoutS = 600;

// The world of one process.
std::unique_ptr<Communicator> make_single_communicator();

// The communicator of this process's launch: single when `ranks` is one process; MPI when it is several
// (MPI_Init here, MPI_Finalize when the communicator goes; MPI's rank and size must be the launcher's). Throws
// for a world launched without MPI (RANK/WORLD_SIZE alone: that is NCCL's launch, for GPUs).
//
// `backend` "nccl": the gradient all-reduce goes through NCCL on this rank's GPU (device local_rank modulo the
// GPUs), the ranks bootstrapped (the NCCL id) and the byte collectives carried by MPI as above; with one rank, an
// NCCL world of one. Throws naming what is missing in a build without NCCL or on a machine without a GPU. The
// all-reduce stages the host buffers through the GPU until the trainer keeps its gradients there (the CUDA
// backend); a reduction that does not finish within `timeout_s` aborts the NCCL communicator and throws, naming
// the rank, instead of hanging. `timeout_s` is every collective's deadline (set_timeout_s), MPI's too.
std::unique_ptr<Communicator> make_communicator(const LaunchRanks& ranks, const std::string& backend = "mpi",
                                                double timeout_s = kDefaultCollectiveTimeoutS);

// The GPUs the "nccl" backend can use in this build on this machine (0: none; `why` says what is missing).
int nccl_devices(std::string* why = nullptr);

// Ends every rank of the launch after a failure on this one (MPI_Abort): the launcher reports which rank
// stopped. Does nothing in a single process.
void abort_launch(const Communicator& comm, int exit_code);

}  // namespace rlcpp
