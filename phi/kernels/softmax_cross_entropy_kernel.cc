// Softmax with cross-entropy over the last dim, hard int64 labels, with ignore_index.
#include <cmath>

#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using namespace kernels_internal;  // NOLINT: the kernels' own helpers

namespace {

constexpr const char* kKernel = "softmax_with_cross_entropy";

// Checks logits [N, C] against label [N] or [N, 1]; returns {N, C}.
std::pair<int64_t, int64_t> CheckShapes(const DenseTensor& logits, const DenseTensor& label) {
  PADDLE_ENFORCE_EQ(logits.dims().size(), 2,
                    errors::InvalidArgument("%s: logits must be [N, C], got %s.", kKernel,
                                            logits.dims().to_str().c_str()));
  CheckInt64(label, kKernel, "label");
  int64_t n = logits.dims()[0];
  bool ok = (label.dims().size() == 1 && label.dims()[0] == n) ||
            (label.dims().size() == 2 && label.dims()[0] == n && label.dims()[1] == 1);
  PADDLE_ENFORCE(ok, errors::InvalidArgument("%s: label must be [%ld] or [%ld, 1], got %s.",
                                             kKernel, long(n), long(n),
                                             label.dims().to_str().c_str()));
  return {n, logits.dims()[1]};
}

void CheckLabels(const DenseTensor& label, int64_t classes, int64_t ignore_index) {
  const int64_t* l = label.data<int64_t>();
  for (int64_t i = 0, count = label.numel(); i < count; ++i) {
    PADDLE_ENFORCE(l[i] == ignore_index || (l[i] >= 0 && l[i] < classes),
                   errors::InvalidArgument("%s: label[%ld] = %ld is outside [0, %ld).", kKernel,
                                           long(i), long(l[i]), long(classes)));
  }
}

}  // namespace

void SoftmaxWithCrossEntropyKernel(const DenseTensor& logits, const DenseTensor& label,
                                   int64_t ignore_index, DenseTensor* softmax,
                                   DenseTensor* loss) {
  CheckCpuInput(logits, kKernel, "logits");
  CheckCpuInput(label, kKernel, "label");
  CheckFloating(logits, kKernel, "logits");
  auto [n, c] = CheckShapes(logits, label);
  CheckLabels(label, c, ignore_index);
  VisitFloating(logits.dtype(), kKernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor sm(CPUPlace(), logits.dtype(), logits.dims());
    DenseTensor ls(CPUPlace(), logits.dtype(), DDim({n, 1}));
    const T* x = logits.data<T>();
    const int64_t* l = label.data<int64_t>();
    T* s = sm.data<T>();
    T* o = ls.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const T* row = x + i * c;
      double mx = -INFINITY;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, static_cast<double>(row[j]));
      double sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
      double log_sum = std::log(sum);
      for (int64_t j = 0; j < c; ++j) {
        s[i * c + j] = static_cast<T>(std::exp(static_cast<double>(row[j]) - mx - log_sum));
      }
      o[i] = l[i] == ignore_index
                 ? static_cast<T>(0)
                 : static_cast<T>(log_sum + mx - static_cast<double>(row[l[i]]));
    }
    *softmax = std::move(sm);
    *loss = std::move(ls);
  });
}

void SoftmaxWithCrossEntropyGradKernel(const DenseTensor& label, const DenseTensor& softmax,
                                       const DenseTensor& dloss, int64_t ignore_index,
                                       DenseTensor* dlogits) {
  CheckCpuInput(softmax, kKernel, "softmax");
  CheckCpuInput(label, kKernel, "label");
  CheckCpuInput(dloss, kKernel, "dloss");
  CheckFloating(softmax, kKernel, "softmax");
  auto [n, c] = CheckShapes(softmax, label);
  PADDLE_ENFORCE_EQ(dloss.numel(), n,
                    errors::InvalidArgument("%s_grad: dloss must have %ld elements, got %s.",
                                            kKernel, long(n), dloss.dims().to_str().c_str()));
  PADDLE_ENFORCE(dloss.dtype() == softmax.dtype(),
                 errors::InvalidArgument("%s_grad: dloss is %s but softmax is %s.", kKernel,
                                         DataTypeToString(dloss.dtype()),
                                         DataTypeToString(softmax.dtype())));
  // A label outside [0, C) would otherwise match no column and pass as a silent wrong
  // gradient.
  CheckLabels(label, c, ignore_index);
  VisitFloating(softmax.dtype(), kKernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor dx(CPUPlace(), softmax.dtype(), softmax.dims());
    const T* s = softmax.data<T>();
    const T* d = dloss.data<T>();
    const int64_t* l = label.data<int64_t>();
    T* g = dx.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      double scale = l[i] == ignore_index ? 0.0 : static_cast<double>(d[i]);
      for (int64_t j = 0; j < c; ++j) {
        double onehot = (j == l[i]) ? 1.0 : 0.0;
        g[i * c + j] = static_cast<T>((static_cast<double>(s[i * c + j]) - onehot) * scale);
      }
    }
    *dlogits = std::move(dx);
  });
}

}  // namespace phi
