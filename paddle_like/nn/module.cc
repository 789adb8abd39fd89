#include "paddle_like/nn/module.h"

#include <cmath>
#include <random>

#include "paddle_like/eager/functional.h"
#include "phi/core/errors.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace nn {

namespace F = functional;

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  Collect("", false, &out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  Collect("", true, &out);
  return out;
}

void Module::Collect(const std::string& prefix, bool buffers,
                     std::vector<std::pair<std::string, Tensor>>* out) const {
  for (const auto& [name, t] : buffers ? buffers_ : parameters_) out->emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->Collect(prefix + name + ".", buffers, out);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::clear_gradients(bool set_to_zero) {
  for (Tensor& p : parameters()) p.clear_grad(set_to_zero);
}

Tensor& Module::register_parameter(std::string name, Tensor parameter) {
  PADDLE_ENFORCE(parameter.defined() && parameter.is_leaf(),
                 phi::errors::InvalidArgument("register_parameter('%s'): a parameter is a "
                                              "defined leaf tensor.",
                                              name.c_str()));
  if (parameter.name().empty()) parameter.set_name(name);
  parameters_.emplace_back(std::move(name), std::move(parameter));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(std::string name, Tensor buffer) {
  if (buffer.name().empty()) buffer.set_name(name);
  buffers_.emplace_back(std::move(name), std::move(buffer));
  return buffers_.back().second;
}

Tensor MakeParameter(const phi::DDim& dims, phi::DataType dtype, uint64_t seed, double limit,
                     bool normal, std::string name) {
  std::mt19937_64 gen(seed);
  std::vector<double> values(static_cast<size_t>(dims.numel()));
  // Draws by hand from the raw bits (std distributions differ across standard libraries).
  auto uniform01 = [&] { return static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0); };
  for (size_t i = 0; i < values.size(); ++i) {
    if (normal) {
      double u1 = std::max(uniform01(), 1e-300), u2 = uniform01();
      values[i] = limit * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    } else {
      values[i] = (2.0 * uniform01() - 1.0) * limit;
    }
  }
  phi::DenseTensor f64 = phi::DenseTensor::FromVector(values, dims);
  phi::DenseTensor value;
  phi::CastKernel(f64, dtype, &value);
  return Tensor(std::move(value), /*requires_grad=*/true, std::move(name));
}

Linear::Linear(int64_t in_features, int64_t out_features, uint64_t seed, phi::DataType dtype,
               bool bias) {
  PADDLE_ENFORCE(in_features > 0 && out_features > 0,
                 phi::errors::InvalidArgument("Linear(%ld, %ld): features must be positive.",
                                              long(in_features), long(out_features)));
  double limit = std::sqrt(6.0 / static_cast<double>(in_features + out_features));
  weight_ = register_parameter("weight",
                               MakeParameter({in_features, out_features}, dtype, seed, limit));
  if (bias) {
    phi::DenseTensor zeros;
    phi::FullKernel({out_features}, dtype, 0.0, &zeros);
    bias_ = register_parameter("bias", Tensor(std::move(zeros), true));
  }
}

Tensor Linear::forward(const Tensor& input) { return F::linear(input, weight_, bias_); }

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, uint64_t seed,
                     phi::DataType dtype, int64_t padding_idx)
    : padding_idx_(padding_idx) {
  weight_ = register_parameter(
      "weight", MakeParameter({num_embeddings, embedding_dim}, dtype, seed, 1.0, true));
}

Tensor Embedding::forward(const Tensor& ids) { return F::embedding(ids, weight_, padding_idx_); }

Tensor ReLU::forward(const Tensor& input) { return F::relu(input); }
Tensor GELU::forward(const Tensor& input) { return F::gelu(input, approximate_); }
Tensor Tanh::forward(const Tensor& input) { return F::tanh(input); }

Tensor Dropout::forward(const Tensor& input) {
  uint64_t seed = seed_ * 0x9E3779B97F4A7C15ULL + calls_;
  if (training()) ++calls_;
  return F::dropout(input, p_, seed, training());
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (auto& l : layers) append(std::move(l));
}

void Sequential::append(std::shared_ptr<Module> layer) {
  PADDLE_ENFORCE_NOT_NULL(layer, phi::errors::InvalidArgument("Sequential: a null layer."));
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& layer : layers_) x = layer->forward(x);
  return x;
}

Tensor MSELoss::operator()(const Tensor& input, const Tensor& label) const {
  return F::mse_loss(input, label);
}

Tensor CrossEntropyLoss::operator()(const Tensor& logits, const Tensor& label) const {
  return F::cross_entropy(logits, label, ignore_index_, reduction_);
}

}  // namespace nn
}  // namespace paddle_like
