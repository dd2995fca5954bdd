#include "model/executor.h"

#include "model/cpu_executor.h"
#include "model/cuda_executor.h"

namespace rlcpp {

const Executor& executor_of(const ExecContext& ctx) { return executor_for(ctx.device()); }

const Executor& executor_for(Device device) {
  static const CpuExecutor cpu;  // stateless: one of each serves every context
  static const CudaExecutor cuda;
  switch (device) {
    case Device::kCPU: return cpu;
    case Device::kCUDA: return cuda;
  }
  return cpu;
}

}  // namespace rlcpp
