// The plain product on CUDA: cuBLAS on the execution context's handle (kernels/cpu/matmul_cpu.cpp mirrored), in
// fp32 or with TF32/BF16/F16 operand math on tensor cores (CUBLAS_COMPUTE_32F_FAST_*).
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"

namespace rlcpp::cuda {

cublasStatus_t matmul(cublasHandle_t handle, const float* a, bool trans_a, const float* b, bool trans_b, float* c,
                      int64_t m, int64_t n, int64_t k, float alpha, float beta, cublasComputeType_t compute,
                      cudaStream_t stream) {
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t status = cublasSetStream(handle, stream);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the row-major
  // leading dimensions (the stored width of each matrix).
  const int lda = static_cast<int>(std::max<int64_t>(1, trans_a ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, trans_b ? k : n));
  return cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, CUDA_R_32F, ldb, a,
                      CUDA_R_32F, lda, &beta, c, CUDA_R_32F, static_cast<int>(n), compute, CUBLAS_GEMM_DEFAULT);
}

}  // namespace rlcpp::cuda
