// Where this process sits in a data-parallel launch, read from the launcher's environment: OpenMPI's mpirun
// (OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK), Slurm's srun (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID), or
// torchrun-style RANK / WORLD_SIZE / LOCAL_RANK. rlcpp has no launcher of its own.
#pragma once

#include <functional>
#include <string>

namespace rlcpp {

struct LaunchRanks {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string launcher = "none";  // "mpirun", "srun", "env" (RANK/WORLD_SIZE) or "none" (one process)
};

// The variables of the first launcher found (in the order above); one process when none is set. `getenv`
// reads a variable (nullptr when unset); the default reads the process's environment. Throws naming the
// variable when one is not an integer or the rank is outside [0, world size).
LaunchRanks ranks_from_environment(const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace rlcpp
