// Ranks come from the launcher's environment (mpirun, srun, or RANK/WORLD_SIZE); bad values are named.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "tests/error_test_support.h"
#include "trainer/communicator.h"
#include "trainer/launch_env.h"

namespace rlcpp {
namespace {

LaunchRanks ranks_of(const std::map<std::string, std::string>& env) {
  return ranks_from_environment([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnv, EachLauncherIsRead) {
  const LaunchRanks none = ranks_of({});
  EXPECT_EQ(none.world_size, 1);
  EXPECT_EQ(none.launcher, "none");
  const LaunchRanks mpi =
      ranks_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(mpi.rank, 3);
  EXPECT_EQ(mpi.world_size, 4);
  EXPECT_EQ(mpi.local_rank, 1);
  EXPECT_EQ(mpi.launcher, "mpirun");
  const LaunchRanks slurm = ranks_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                      {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.launcher, "srun");  // srun's variables before a stray RANK
  const LaunchRanks env = ranks_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.local_rank, 1);  // no LOCAL_RANK: the rank
  EXPECT_EQ(env.launcher, "env");
}

TEST(LaunchEnv, BadValuesAreNamed) {
  EXPECT_NE(error_of([] { ranks_of({{"SLURM_PROCID", "x1"}, {"SLURM_NTASKS", "2"}}); })
                .find("SLURM_PROCID='x1' is not a rank or size"),
            std::string::npos);
  EXPECT_NE(error_of([] { ranks_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}}); })
                .find("OMPI_COMM_WORLD_RANK=2 is not a rank of OMPI_COMM_WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(error_of([] { ranks_of({{"RANK", "0"}, {"WORLD_SIZE", "-2"}}); }).find("WORLD_SIZE='-2'"),
            std::string::npos);
}

TEST(LaunchEnv, OneProcessIsTheSingleCommunicator) {
  const auto comm = make_communicator(LaunchRanks{});
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->backend(), "single");
  std::string bytes = "x";
  comm->broadcast(bytes, 0);
  EXPECT_EQ(bytes, "x");
  EXPECT_EQ(comm->all_gather("abc"), std::vector<std::string>{"abc"});
  LaunchRanks env;
  env.launcher = "env";
  env.world_size = 2;
  EXPECT_NE(error_of([&] { make_communicator(env); }).find("mpirun -np 2 rlcpp train CONFIG"), std::string::npos);
}

TEST(LaunchEnv, TheNcclBackendNeedsAGpuAndUnknownBackendsAreRefused) {
  EXPECT_NE(error_of([] { make_communicator(LaunchRanks{}, "gloo"); }).find("backend 'gloo', expected mpi or nccl"),
            std::string::npos);
  std::string why;
  if (nccl_devices(&why) > 0) GTEST_SKIP() << "a GPU is here: trainer_nccl_test runs the backend";
  EXPECT_FALSE(why.empty());
  EXPECT_NE(error_of([] { make_communicator(LaunchRanks{}, "nccl"); }).find("data-parallel backend nccl: " + why),
            std::string::npos);
}

}  // namespace
}  // namespace rlcpp
