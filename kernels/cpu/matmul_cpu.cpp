// matmul on the CPU: one OpenBLAS sgemm (the OpenMP build, so it shares our thread pool).
#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {

void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
            float alpha, float beta) {
  // Row-major leading dimensions: the stored width of each operand.
  const blasint lda = static_cast<blasint>(trans_a ? m : k);
  const blasint ldb = static_cast<blasint>(trans_b ? k : n);
  const blasint ldc = static_cast<blasint>(n);
  // OpenBLAS rejects ld = 0 even when the matrix is empty.
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              lda > 0 ? lda : 1, b, ldb > 0 ? ldb : 1, beta, c, ldc);
}

}  // namespace rlcpp::cpu
