// Measured peaks of this machine, the yardsticks of the run ledger (report/ledger.h): the FLOP/s the model's own
// matrix product reaches (MFU is achieved FLOP/s over this) and the memory bandwidth of a large copy (a decode
// step that reads every weight once cannot beat weight bytes over this). CPU figures: ops::matmul is OpenBLAS
// sgemm on every thread, the copy runs on every OpenMP thread.
#pragma once

#include <cstdint>

namespace rlcpp {

// FLOP/s (2·M·N·K per call) of an fp32 (M,K) @ (K,N) ops::matmul on the CPU: the fastest of `iters` timed
// calls after one untimed one — a peak, and the call least slowed by other work on the cores (a median taken
// while another process ran made a tiny model's MFU read 178 %).
double measure_matmul_flops(int64_t m, int64_t n, int64_t k, int iters);

// FLOP/s of a bf16 (M,K) @ (K,N)^T through ops::matmul_packed against bf16 panels (operands rounded to bf16,
// fp32 accumulation: AVX512-BF16's vdpbf16ps where the CPU has it), the fastest of `iters` timed calls after an
// untimed one: the peak of a bf16 model's products on the CPU.
double measure_packed_bf16_flops(int64_t m, int64_t n, int64_t k, int iters);

// Bytes/s of copying a `bytes`-byte buffer into another, counting the read and the write (2·bytes a copy):
// the median of `iters` timed copies after one that also faults the pages in.
double measure_copy_bandwidth(int64_t bytes, int iters);

// Bytes/s of reading a `bytes`-byte buffer once (a sum on every OpenMP thread): what a decode step, which only
// reads its weights, is bounded by. The median of `iters` timed passes after one that faults the pages in.
double measure_read_bandwidth(int64_t bytes, int iters);

}  // namespace rlcpp
