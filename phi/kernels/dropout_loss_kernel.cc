// Seeded dropout and the MSE loss, with gradients.
#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using namespace kernels_internal;  // NOLINT: the kernels' own helpers

namespace {

// SplitMix64 of (seed, index): a counter-based generator, so element i's draw depends on
// nothing but the seed and i (reproducible across ranks and thread counts).
double UniformAt(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

void CheckProbability(double p) {
  PADDLE_ENFORCE(p >= 0.0 && p < 1.0,
                 errors::InvalidArgument("dropout: p must be in [0, 1), got %g.", p));
}

}  // namespace

void DropoutKernel(const DenseTensor& x, double p, uint64_t seed, DenseTensor* out,
                   DenseTensor* mask) {
  CheckCpuInput(x, "dropout", "x");
  CheckFloating(x, "dropout", "x");
  CheckProbability(p);
  DenseTensor m(CPUPlace(), DataType::UINT8, x.dims());
  uint8_t* pm = m.data<uint8_t>();
  for (int64_t i = 0, count = x.numel(); i < count; ++i) pm[i] = UniformAt(seed, i) >= p ? 1 : 0;
  DropoutGradKernel(m, x, p, out);  // out = x * mask / (1 - p): the same map as the gradient
  *mask = std::move(m);
}

void DropoutGradKernel(const DenseTensor& mask, const DenseTensor& dout, double p,
                       DenseTensor* dx) {
  CheckCpuInput(dout, "dropout_grad", "dout");
  CheckCpuInput(mask, "dropout_grad", "mask");
  CheckProbability(p);
  PADDLE_ENFORCE(mask.dtype() == DataType::UINT8 && mask.dims() == dout.dims(),
                 errors::InvalidArgument("dropout_grad: mask must be uint8 %s, got %s %s.",
                                         dout.dims().to_str().c_str(),
                                         DataTypeToString(mask.dtype()),
                                         mask.dims().to_str().c_str()));
  VisitFloating(dout.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor result(CPUPlace(), dout.dtype(), dout.dims());
    const uint8_t* pm = mask.data<uint8_t>();
    const T* d = dout.data<T>();
    T* o = result.data<T>();
    double keep_scale = 1.0 / (1.0 - p);
    for (int64_t i = 0, count = dout.numel(); i < count; ++i) {
      o[i] = pm[i] ? static_cast<T>(static_cast<double>(d[i]) * keep_scale) : static_cast<T>(0);
    }
    *dx = std::move(result);
  });
}

void MseLossKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* loss) {
  DenseTensor diff;
  SubtractKernel(x, y, &diff);
  DenseTensor sq;
  MultiplyKernel(diff, diff, &sq);
  MeanAllKernel(sq, loss);
}

void MseLossGradKernel(const DenseTensor& x, const DenseTensor& y, const DenseTensor& dloss,
                       DenseTensor* dx) {
  CheckCpuInput(dloss, "mse_loss_grad", "dloss");
  PADDLE_ENFORCE_EQ(dloss.numel(), 1,
                    errors::InvalidArgument("mse_loss_grad: dloss must have one element, got %s.",
                                            dloss.dims().to_str().c_str()));
  DenseTensor diff;
  SubtractKernel(x, y, &diff);
  double d = 0;
  VisitFloating(dloss.dtype(), "mse_loss_grad",
                [&](auto tag) { d = static_cast<double>(dloss.data<typename decltype(tag)::type>()[0]); });
  ScaleKernel(diff, 2.0 * d / static_cast<double>(x.numel()), 0.0, true, dx);
}

}  // namespace phi
