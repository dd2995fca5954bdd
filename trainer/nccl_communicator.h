// The "nccl" data-parallel backend (trainer/communicator.h): gradient all-reduces by NCCL on this rank's GPU,
// everything else (the NCCL id at start, byte broadcasts and gathers) by the bootstrap communicator (MPI, or
// the single process). Built from trainer/cuda/nccl_communicator.cpp where CUDA and NCCL are found; elsewhere
// make_nccl_communicator throws saying so.
#pragma once

#include <memory>
#include <string>

#include "trainer/communicator.h"

namespace rlcpp {

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap, int local_rank,
                                                     double timeout_s);

}  // namespace rlcpp
