#include "trainer/communicator.h"

// MPI's C API only (the C++ bindings are deprecated and would need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/metrics.h"
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
  void set_timeout_s(double seconds) override { timeout_s_ = seconds; }
  double timeout_s() const override { return timeout_s_; }

 private:
  double timeout_s_ = kDefaultCollectiveTimeoutS;  // nothing to wait for in a world of one
};

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  RLCPP_FAIL("MPI: " << what << " failed: " << std::string(text, static_cast<size_t>(length)));
}

// MPI_COMM_WORLD, initialised here (funneled: only the creating thread calls MPI) and finalised when it goes.
// Every collective is non-blocking and polled against the deadline (set_timeout_s); while a rank polls it also
// answers the others' "are you there" on a duplicate of the world of its own (liveness_), so that a rank whose
// deadline passes can tell the ranks that wait with it from those that do not answer.
class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(const LaunchRanks& ranks, double timeout_s) : timeout_s_(timeout_s) {
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
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &liveness_), "MPI_Comm_dup");
  }
  ~MpiCommunicator() override {
    // After a missed deadline the collectives in flight never complete: nothing is waited for (the launch is
    // aborted by then, abort_launch).
    if (!requests_.empty() && !stuck_)
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    MPI_Comm_free(&liveness_);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  void set_timeout_s(double seconds) override { timeout_s_ = seconds; }
  double timeout_s() const override { return timeout_s_; }

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
    answer_pings();
    if (requests_.empty()) return;
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
  }
  void wait_all() override { wait_for(requests_, "the gradients' all-reduce"); }
  void broadcast(std::string& bytes, int root) override {
    const std::string what = "a broadcast from rank " + std::to_string(root);
    int64_t n = static_cast<int64_t>(bytes.size());
    std::vector<MPI_Request> pending(1);
    check_mpi(MPI_Ibcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD, &pending[0]), "MPI_Ibcast (size)");
    wait_for(pending, what);
    bytes.resize(static_cast<size_t>(n));
    constexpr int64_t kMaxCount = int64_t{1} << 30;
    for (int64_t at = 0; at < n; at += kMaxCount) {
      pending.emplace_back();
      check_mpi(MPI_Ibcast(bytes.data() + at, static_cast<int>(std::min(kMaxCount, n - at)), MPI_BYTE, root,
                           MPI_COMM_WORLD, &pending.back()),
                "MPI_Ibcast");
    }
    wait_for(pending, what);
  }
  std::vector<std::string> all_gather(const std::string& bytes) override {
    const int64_t mine = static_cast<int64_t>(bytes.size());
    std::vector<int64_t> sizes(static_cast<size_t>(size_));
    std::vector<MPI_Request> pending(1);
    check_mpi(MPI_Iallgather(&mine, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, MPI_COMM_WORLD, &pending[0]),
              "MPI_Iallgather (sizes)");
    wait_for(pending, "an all-gather");
    std::vector<std::string> out(static_cast<size_t>(size_));
    // One broadcast per rank: the pieces may be large and of any size (no int displacements to overflow).
    for (int r = 0; r < size_; ++r) {
      out[static_cast<size_t>(r)] = r == rank_ ? bytes : std::string(static_cast<size_t>(sizes[r]), '\0');
      broadcast(out[static_cast<size_t>(r)], r);
    }
    return out;
  }

 private:
  static constexpr int kPingTag = 1, kPongTag = 2;

  // Polls `pending` until every request completes (answering pings meanwhile); past the deadline, asks who is
  // there and throws naming the ranks that are not. Every rank answering is no verdict yet: one that was busy (a
  // rank answers only while it waits in a collective) may just have arrived in this one, which then completes; if
  // it has not completed by the next deadline and every rank answers again, they wait in different collectives.
  // Spins for the first second (a collective in the step's critical path), then sleeps a millisecond between
  // polls (a rank waiting for the lead's rollout).
  void wait_for(std::vector<MPI_Request>& pending, const std::string& what) {
    Stopwatch waited;
    double deadline_s = timeout_s_;
    bool everyone_answered = false;
    for (;;) {
      int done = 0;
      if (!pending.empty())
        check_mpi(MPI_Testall(static_cast<int>(pending.size()), pending.data(), &done, MPI_STATUSES_IGNORE),
                  "MPI_Testall");
      if (pending.empty() || done) {
        pending.clear();
        return;
      }
      answer_pings();
      const double seconds = waited.seconds();
      if (timeout_s_ > 0 && seconds > deadline_s) {
        const std::string silent = silent_ranks();
        if (!silent.empty() || everyone_answered) fail(what, waited.seconds(), silent);
        everyone_answered = true;
        deadline_s = waited.seconds() + timeout_s_;
      }
      if (seconds > 1.0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Answers every ping that has arrived (the answer's send completes on its own: its request is freed).
  void answer_pings() {
    for (;;) {
      int arrived = 0;
      MPI_Status status;
      check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, liveness_, &arrived, &status), "MPI_Iprobe");
      if (!arrived) return;
      int32_t ping = 0;
      check_mpi(MPI_Recv(&ping, 1, MPI_INT32_T, status.MPI_SOURCE, kPingTag, liveness_, MPI_STATUS_IGNORE),
                "MPI_Recv (ping)");
      MPI_Request answer;
      check_mpi(MPI_Isend(&kAnswer, 1, MPI_INT32_T, status.MPI_SOURCE, kPongTag, liveness_, &answer), "MPI_Isend");
      MPI_Request_free(&answer);
    }
  }

  // Pings every other rank and waits a little for the answers (answering the others' pings meanwhile: they may be
  // asking too); returns the ranks that gave none ("1, 3"), empty when every rank answered.
  std::string silent_ranks() {
    std::vector<MPI_Request> answers(static_cast<size_t>(size_), MPI_REQUEST_NULL);
    std::vector<int32_t> received(static_cast<size_t>(size_), 0);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request ping;
      check_mpi(MPI_Isend(&kAnswer, 1, MPI_INT32_T, r, kPingTag, liveness_, &ping), "MPI_Isend (ping)");
      MPI_Request_free(&ping);
      check_mpi(MPI_Irecv(&received[static_cast<size_t>(r)], 1, MPI_INT32_T, r, kPongTag, liveness_,
                          &answers[static_cast<size_t>(r)]),
                "MPI_Irecv (answer)");
    }
    const double grace_s = std::min(timeout_s_, 5.0);
    Stopwatch asked;
    std::string silent;
    for (;;) {
      silent.clear();
      for (int r = 0; r < size_; ++r) {
        MPI_Request& a = answers[static_cast<size_t>(r)];
        int done = 1;
        if (a != MPI_REQUEST_NULL) check_mpi(MPI_Test(&a, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (!done) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      }
      if (silent.empty() || asked.seconds() > grace_s) break;
      answer_pings();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (MPI_Request& a : answers)
      if (a != MPI_REQUEST_NULL) {
        MPI_Cancel(&a);
        MPI_Request_free(&a);
      }
    return silent;
  }

  // Past the deadline in `what`, after `waited_s`: throws naming the `silent` ranks, or saying that every rank
  // answers but waits elsewhere. The collectives in flight are left behind (stuck_).
  [[noreturn]] void fail(const std::string& what, double waited_s, const std::string& silent) {
    stuck_ = true;
    std::ostringstream text;
    text << "data parallelism: rank " << rank_ << " of " << size_ << " waited " << std::fixed << std::setprecision(1)
         << waited_s << " s in " << what << std::defaultfloat << " (trainer.collective_timeout_s = " << timeout_s_
         << ") and ";
    if (!silent.empty())
      text << "rank(s) " << silent << " did not answer: stopped, hung, or busy for longer than the deadline "
           << "(raise trainer.collective_timeout_s for steps whose rollout, evaluation or checkpoint take longer)";
    else
      text << "every rank answers, twice a deadline apart: they wait in different collectives (do they run the "
           << "same binary and config?)";
    throw Error(text.str());
  }

  static constexpr int32_t kAnswer = 1;  // the payload of pings and answers (a send buffer that outlives them)
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  bool stuck_ = false;  // a deadline passed: collectives are left in flight
  MPI_Comm liveness_ = MPI_COMM_NULL;
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
      ranks.world_size == 1 ? make_single_communicator() : std::make_unique<MpiCommunicator>(ranks, timeout_s);
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
