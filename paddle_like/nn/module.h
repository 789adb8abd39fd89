// nn modules: a Module base with parameters() and buffers(), Linear, Embedding, the
// activations, seeded Dropout, Sequential, and the MSE and cross-entropy losses.
//
// Parameters are leaf Tensors that require grad, created in a module's constructor from a
// seed (the same seed gives the same weights on every rank and in every process, which the
// DataParallel equivalence tests rely on).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/eager/tensor.h"

namespace paddle_like {
namespace nn {

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& input) = 0;
  Tensor operator()(const Tensor& input) { return forward(input); }

  // This module's and its children's parameters (and buffers), in registration order,
  // depth first.
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> buffers() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;

  // Train / eval mode (Dropout), recursively.
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  // Zeroes (or drops) every parameter's gradient.
  void clear_gradients(bool set_to_zero = true);

 protected:
  // Registers and returns a parameter / buffer / child; names are dotted with the child's.
  Tensor& register_parameter(std::string name, Tensor parameter);
  Tensor& register_buffer(std::string name, Tensor buffer);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> child) {
    children_.emplace_back(std::move(name), child);
    return child;
  }

 private:
  void Collect(const std::string& prefix, bool buffers,
               std::vector<std::pair<std::string, Tensor>>* out) const;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// y = x @ weight + bias; weight [in, out] (Xavier-uniform from `seed`), bias [out] zeros.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, uint64_t seed,
         phi::DataType dtype = phi::DataType::FLOAT32, bool bias = true);
  Tensor forward(const Tensor& input) override;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_;
  Tensor bias_;
};

// Lookup of int64 ids into a [num_embeddings, dim] table (normal(0, 1) from `seed`).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, uint64_t seed,
            phi::DataType dtype = phi::DataType::FLOAT32, int64_t padding_idx = -1);
  Tensor forward(const Tensor& ids) override;
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
  int64_t padding_idx_;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};
class GELU : public Module {
 public:
  explicit GELU(bool approximate = false) : approximate_(approximate) {}
  Tensor forward(const Tensor& input) override;

 private:
  bool approximate_;
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

// Each training-mode call draws a new mask from (seed, call number): reproducible runs.
class Dropout : public Module {
 public:
  explicit Dropout(double p, uint64_t seed = 0) : p_(p), seed_(seed) {}
  Tensor forward(const Tensor& input) override;

 private:
  double p_;
  uint64_t seed_;
  uint64_t calls_ = 0;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  void append(std::shared_ptr<Module> layer);
  Tensor forward(const Tensor& input) override;
  size_t size() const { return layers_.size(); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// Losses: callables of (input, label).
class MSELoss {
 public:
  Tensor operator()(const Tensor& input, const Tensor& label) const;
};
class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, std::string reduction = "mean")
      : ignore_index_(ignore_index), reduction_(std::move(reduction)) {}
  Tensor operator()(const Tensor& logits, const Tensor& label) const;

 private:
  int64_t ignore_index_;
  std::string reduction_;
};

// A new parameter of `dims` x `dtype`: uniform in [-limit, limit] (or normal(0, stddev) when
// `normal`) from `seed`.
Tensor MakeParameter(const phi::DDim& dims, phi::DataType dtype, uint64_t seed, double limit,
                     bool normal = false, std::string name = "");

}  // namespace nn
}  // namespace paddle_like
