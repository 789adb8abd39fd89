// Optimizers over a list of parameters: SGD with momentum, and Adam. step() updates every
// parameter that has a gradient (one that got none this step is left alone, as in Paddle).
#pragma once

#include <cstdint>
#include <vector>

#include "paddle_like/eager/tensor.h"

namespace paddle_like {
namespace optimizer {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> parameters, double learning_rate);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // Zeroes the gradients in place (keeps DataParallel's bucket views), or drops them.
  void clear_grad(bool set_to_zero = true);
  double get_lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<Tensor>& parameters() const { return parameters_; }

 protected:
  std::vector<Tensor> parameters_;
  double lr_;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> parameters, double learning_rate, double momentum = 0.0,
      double weight_decay = 0.0);
  void step() override;

 private:
  double momentum_;
  double weight_decay_;
  std::vector<phi::DenseTensor> velocity_;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> parameters, double learning_rate = 1e-3, double beta1 = 0.9,
       double beta2 = 0.999, double epsilon = 1e-8);
  void step() override;

 private:
  double beta1_, beta2_, epsilon_;
  std::vector<phi::DenseTensor> moment1_, moment2_;
  std::vector<int64_t> steps_;
};

}  // namespace optimizer
}  // namespace paddle_like
