// The BLAS behind phi's CPU matmul (OpenBLAS through cblas) and its thread count.
//
// Ranks are processes, often more of them than cores: a BLAS that starts a thread per core in
// each rank makes them fight over the cores. So the first matmul sets OpenBLAS to
// FLAGS_blas_num_threads threads (default 1), unless the user chose otherwise:
//   - FLAGS_blas_num_threads=N (the gflag, or the environment variable of that name) wins;
//     0 leaves OpenBLAS's own default (OPENBLAS_NUM_THREADS, else one thread per core);
//   - else OPENBLAS_NUM_THREADS, when set, is left to OpenBLAS;
//   - else 1.
#pragma once

#include <string>

#include <gflags/gflags.h>

DECLARE_int32(blas_num_threads);

namespace phi {

// Applies the rule above now (the first matmul does it otherwise); returns the thread count
// OpenBLAS then uses.
int InitBlasThreads();
// "OpenBLAS 0.3.21 ... (SkylakeX), N thread(s)": what the CPU matmul runs on (logs,
// benchmarks).
std::string BlasInfo();

}  // namespace phi
