#include "trainer/launch_env.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace rlcpp {

namespace {

int read_int(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  RLCPP_CHECK(end != value && *end == '\0' && errno == 0 && v >= 0 && v <= (1 << 24),
              "launch: environment variable " << name << "='" << value << "' is not a rank or size (an integer in "
                                              << "[0, 16777216])");
  return static_cast<int>(v);
}

}  // namespace

LaunchRanks ranks_from_environment(const std::function<const char*(const char*)>& getenv_fn) {
  const auto get = [&](const char* name) { return getenv_fn ? getenv_fn(name) : std::getenv(name); };
  struct Scheme {
    const char* launcher;
    const char *rank, *size, *local;
  };
  const Scheme schemes[] = {
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"env", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  for (const Scheme& s : schemes) {
    const char* rank = get(s.rank);
    const char* size = get(s.size);
    if (rank == nullptr || size == nullptr) continue;
    LaunchRanks r;
    r.launcher = s.launcher;
    r.rank = read_int(s.rank, rank);
    r.world_size = read_int(s.size, size);
    const char* local = get(s.local);
    r.local_rank = local ? read_int(s.local, local) : r.rank;
    RLCPP_CHECK(r.world_size >= 1 && r.rank < r.world_size,
                "launch: " << s.rank << "=" << r.rank << " is not a rank of " << s.size << "=" << r.world_size);
    return r;
  }
  return {};
}

}  // namespace rlcpp
