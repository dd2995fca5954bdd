#include "trainer/communicator.h"

// MPI's C API only (the C++ bindings are deprecated and would need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "trainer/nccl_communicator.h"

namespace rlcpp {

namespace {

class SingleCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  void start_all_reduce(float*, int64_t) override {}
  void start_all_gather(const float* data, int64_t n, float* out) override {
    std::memcpy(out, data, static_cast<size_t>(n) * sizeof(float));
  }
  void progress() override {}
  void wait_all() override {}
  void broadcast(std::string&, int root) override {
    RLCPP_CHECK(root == 0, "broadcast: root " << root << " in a world of one");
  }
  std::vector<std::string> all_gather(const std::string& bytes) override { return {bytes}; }
};

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  RLCPP_FAIL("MPI: " << what << " failed: " << std::string(text, static_cast<size_t>(length)));
}

// MPI_COMM_WORLD, initialised here (funneled: only the creating thread calls MPI) and finalised when it goes.
class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(const LaunchRanks& ranks) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    RLCPP_CHECK(!initialised, "MPI: initialised twice in one process");
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    // Errors come back as codes (and become exceptions naming the call) instead of aborting the job silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    RLCPP_CHECK(rank_ == ranks.rank && size_ == ranks.world_size,
                "MPI: this process is rank " << rank_ << " of " << size_ << ", but " << ranks.launcher
                                             << "'s environment says rank " << ranks.rank << " of "
                                             << ranks.world_size);
  }
  ~MpiCommunicator() override {
    if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void start_all_reduce(float* data, int64_t n) override {
    // MPI counts are ints: a bucket larger than 2^31 - 1 floats goes in pieces.
    constexpr int64_t kMaxCount = int64_t{1} << 30;
    for (int64_t at = 0; at < n; at += kMaxCount) {
      MPI_Request r;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(kMaxCount, n - at)), MPI_FLOAT,
                               MPI_SUM, MPI_COMM_WORLD, &r),
                "MPI_Iallreduce");
      requests_.push_back(r);
    }
  }
  void start_all_gather(const float* data, int64_t n, float* out) override {
    RLCPP_CHECK(n < (int64_t{1} << 31), "MPI: a gradient bucket of " << n << " floats is too large to gather");
    MPI_Request r;
    check_mpi(MPI_Iallgather(data, static_cast<int>(n), MPI_FLOAT, out, static_cast<int>(n), MPI_FLOAT,
                             MPI_COMM_WORLD, &r),
              "MPI_Iallgather");
    requests_.push_back(r);
  }
  void progress() override {
    if (requests_.empty()) return;
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
  }
  void wait_all() override {
    if (requests_.empty()) return;
    check_mpi(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
              "MPI_Waitall");
    requests_.clear();
  }
  void broadcast(std::string& bytes, int root) override {
    int64_t n = static_cast<int64_t>(bytes.size());
    check_mpi(MPI_Bcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "MPI_Bcast (size)");
    bytes.resize(static_cast<size_t>(n));
    constexpr int64_t kMaxCount = int64_t{1} << 30;
    for (int64_t at = 0; at < n; at += kMaxCount)
      check_mpi(MPI_Bcast(bytes.data() + at, static_cast<int>(std::min(kMaxCount, n - at)), MPI_BYTE, root,
                          MPI_COMM_WORLD),
                "MPI_Bcast");
  }
  std::vector<std::string> all_gather(const std::string& bytes) override {
    const int64_t mine = static_cast<int64_t>(bytes.size());
    std::vector<int64_t> sizes(static_cast<size_t>(size_));
    check_mpi(MPI_Allgather(&mine, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, MPI_COMM_WORLD),
              "MPI_Allgather (sizes)");
    std::vector<std::string> out(static_cast<size_t>(size_));
    // One broadcast per rank: the pieces may be large and of any size (no int displacements to overflow).
    for (int r = 0; r < size_; ++r) {
      out[static_cast<size_t>(r)] = r == rank_ ? bytes : std::string(static_cast<size_t>(sizes[r]), '\0');
      broadcast(out[static_cast<size_t>(r)], r);
    }
    return out;
  }

 private:
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> requests_;
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

std::unique_ptr<Communicator> make_communicator(const LaunchRanks& ranks, const std::string& backend,
                                                double timeout_s) {
  RLCPP_CHECK(backend == "mpi" || backend == "nccl",
              "launch: data-parallel backend '" << backend << "', expected mpi or nccl");
  RLCPP_CHECK(ranks.world_size == 1 || ranks.launcher != "env",
              "launch: RANK=" << ranks.rank << " WORLD_SIZE=" << ranks.world_size << " without mpirun or srun: "
                              << "rlcpp's ranks bootstrap over MPI; launch with `mpirun -np "
                              << ranks.world_size << " rlcpp train CONFIG` (or srun)");
  std::unique_ptr<Communicator> bootstrap =
      ranks.world_size == 1 ? make_single_communicator() : std::make_unique<MpiCommunicator>(ranks);
  if (backend == "mpi") return bootstrap;
  return make_nccl_communicator(std::move(bootstrap), ranks.local_rank, timeout_s);
}

void abort_launch(const Communicator& comm, int exit_code) {
  if (comm.size() > 1) {  // under mpirun or srun: MPI is initialised whatever carries the gradients
    int initialised = 0, finalised = 0;
    MPI_Initialized(&initialised);
    MPI_Finalized(&finalised);
    if (initialised && !finalised) MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
}

}  // namespace rlcpp
