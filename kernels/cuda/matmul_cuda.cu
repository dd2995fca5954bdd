// The plain product on CUDA: cuBLAS on the execution context's handle (kernels/cpu/matmul_cpu.cpp mirrored), in
// fp32, TF32 operand math on tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), or on BF16/F16 operands rounded here.
//
// BF16 and F16 operands are rounded explicitly (to nearest even, the CPU's bits: cuda::convert) into stream-ordered
// scratch and multiplied as 16-bit matrices with fp32 accumulation and output (CUBLAS_COMPUTE_32F), as PyTorch's
// autocast multiplies. CUBLAS_COMPUTE_32F_FAST_16BF on fp32 operands is not that: on an H200 with CUDA 13 (the
// first GPU run, bench/RESULTS.md) cuBLAS kept more than bf16's bits for some shapes (a split-bf16 product) and
// not for others, so a bf16 role's products depended on the batch shape and matched neither the CPU's bf16 model
// nor fp32 (kernels_cuda_ops_test: CudaOps.MatmulMathRoundsTheOperands).
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"

namespace rlcpp::cuda {
namespace {

int leading(int64_t columns) { return static_cast<int>(std::max<int64_t>(1, columns)); }

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the row-major leading
// dimensions (the stored width of each matrix).
cublasStatus_t gemm(cublasHandle_t handle, const void* a, bool trans_a, const void* b, bool trans_b, float* c,
                    int64_t m, int64_t n, int64_t k, float alpha, float beta, cudaDataType_t operands,
                    cublasComputeType_t compute) {
  return cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, operands,
                      leading(trans_b ? k : n), a, operands, leading(trans_a ? m : k), &beta, c, CUDA_R_32F,
                      static_cast<int>(n), compute, CUBLAS_GEMM_DEFAULT);
}

}  // namespace

cublasStatus_t matmul(cublasHandle_t handle, const float* a, bool trans_a, const float* b, bool trans_b, float* c,
                      int64_t m, int64_t n, int64_t k, float alpha, float beta, DType math, cudaStream_t stream) {
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t status = cublasSetStream(handle, stream);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (math != DType::kBF16 && math != DType::kF16)
    return gemm(handle, a, trans_a, b, trans_b, c, m, n, k, alpha, beta, CUDA_R_32F,
                math == DType::kTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  // The operands rounded into scratch freed in stream order after the product. Not yet tuned (the first GPU run
  // checked its bits, not its speed): the device's default pool returns the scratch at each synchronisation (its
  // release threshold is 0), and a weight is rounded again at every product rather than once per version.
  const int64_t a_elems = m * k, b_elems = k * n;
  void* scratch = nullptr;
  if (cudaMallocAsync(&scratch, static_cast<size_t>(a_elems + b_elems) * 2, stream) != cudaSuccess)
    return CUBLAS_STATUS_ALLOC_FAILED;
  void* a16 = scratch;
  void* b16 = static_cast<char*>(scratch) + a_elems * 2;
  if (convert(a, DType::kF32, a16, math, a_elems, stream) != cudaSuccess ||
      convert(b, DType::kF32, b16, math, b_elems, stream) != cudaSuccess) {
    cudaFreeAsync(scratch, stream);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  status = gemm(handle, a16, trans_a, b16, trans_b, c, m, n, k, alpha, beta,
                math == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F, CUBLAS_COMPUTE_32F);
  if (cudaFreeAsync(scratch, stream) != cudaSuccess && status == CUBLAS_STATUS_SUCCESS)
    status = CUBLAS_STATUS_EXECUTION_FAILED;
  return status;
}

}  // namespace rlcpp::cuda
