// Row-major GEMM for the math kernels (phi/kernels/blas.cc wraps OpenBLAS's cblas).
#pragma once

#include <cstdint>

namespace phi {
namespace kernels_internal {

// c[m, n] = op(a) @ op(b) (+ c when `accumulate`), row-major; op transposes when the flag is
// set, which cblas does in its packing (no copy here). lda / ldb are the row lengths of a and
// b as stored. m, n, k >= 0; k == 0 gives zeros (or leaves c when accumulating). Raises
// InvalidArgument when a dimension does not fit cblas's int.
void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c);
void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a,
              int64_t lda, const double* b, int64_t ldb, bool accumulate, double* c);

}  // namespace kernels_internal
}  // namespace phi
