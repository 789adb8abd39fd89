// OpenBLAS behind the math kernels' GEMM: the thread-count rule of blas.h and the cblas calls.
#include "phi/kernels/blas.h"

#include <cblas.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <glog/logging.h>

#include "phi/core/errors.h"
#include "phi/kernels/blas_internal.h"

DEFINE_int32(blas_num_threads, 1,
             "OpenBLAS threads per process for the CPU matmul (0: OpenBLAS's default); "
             "see phi/kernels/blas.h");

namespace phi {

namespace {

std::once_flag blas_threads_once;

std::string Describe() {
  std::string s = openblas_get_config();
  s += " (";
  s += openblas_get_corename();
  s += "), " + std::to_string(openblas_get_num_threads()) + " thread(s)";
  return s;
}

void ApplyThreadRule() {
  // FLAGS_<name> environment variables are read when phi/core/flags.cc initializes, which may
  // be before this file registered the flag: read this one here too.
  gflags::CommandLineFlagInfo info = gflags::GetCommandLineFlagInfoOrDie("blas_num_threads");
  if (info.is_default) {
    if (const char* v = std::getenv("FLAGS_blas_num_threads")) {
      if (gflags::SetCommandLineOption("blas_num_threads", v).empty()) {
        LOG(WARNING) << "ignoring FLAGS_blas_num_threads=" << v << ": not an int32";
      } else {
        info.is_default = false;
      }
    }
  }
  const char* env = std::getenv("OPENBLAS_NUM_THREADS");
  const bool user_env = env != nullptr && *env != '\0';
  if (!info.is_default) {
    if (FLAGS_blas_num_threads > 0) openblas_set_num_threads(FLAGS_blas_num_threads);
  } else if (!user_env) {
    openblas_set_num_threads(FLAGS_blas_num_threads);
  }
  VLOG(1) << "BLAS: " << Describe();
}

void EnsureThreads() { std::call_once(blas_threads_once, ApplyThreadRule); }

int CheckedInt(int64_t v, const char* what) {
  PADDLE_ENFORCE(v >= 0 && v <= INT_MAX,
                 errors::InvalidArgument("matmul: %s = %ld does not fit the BLAS's 32-bit int.",
                                         what, long(v)));
  return static_cast<int>(v);
}

// The cblas call shared by both dtypes: `gemm` is cblas_sgemm or cblas_dgemm.
template <typename T, typename Gemm>
void GemmWith(Gemm gemm, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              const T* a, int64_t lda, const T* b, int64_t ldb, bool accumulate, T* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // cblas with k == 0 only scales c by beta; an empty a or b may also have lda 0, which
    // cblas rejects. The product of nothing is zeros.
    if (!accumulate) std::memset(c, 0, static_cast<size_t>(m * n) * sizeof(T));
    return;
  }
  EnsureThreads();
  gemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
       CheckedInt(m, "m"), CheckedInt(n, "n"), CheckedInt(k, "k"), T(1), a,
       CheckedInt(lda, "lda"), b, CheckedInt(ldb, "ldb"), accumulate ? T(1) : T(0), c,
       CheckedInt(n, "ldc"));
}

}  // namespace

int InitBlasThreads() {
  EnsureThreads();
  return openblas_get_num_threads();
}

std::string BlasInfo() {
  EnsureThreads();
  return Describe();
}

namespace kernels_internal {

void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c) {
  GemmWith<float>(cblas_sgemm, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c);
}

void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a,
              int64_t lda, const double* b, int64_t ldb, bool accumulate, double* c) {
  GemmWith<double>(cblas_dgemm, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c);
}

}  // namespace kernels_internal
}  // namespace phi
