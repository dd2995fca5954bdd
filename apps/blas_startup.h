// OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and falls back to its SSE3 kernels, 3x slower.
// It reads OPENBLAS_CORETYPE once, when the library loads, before main() runs; so when the variable is unset
// and the CPU has AVX-512 (or AVX2), rlcpp sets it and re-executes itself once.
#pragma once

namespace rlcpp::cli {

void ensure_blas_core_type(char** argv);

}  // namespace rlcpp::cli
