#include "nn/spectral_normalization.hpp"

#include "nn/initializer.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

SpectralNormalization::SpectralNormalization(std::string name, std::unique_ptr<Layer> inner,
                                             int power_iterations)
    : LayerWrapper(std::move(name), std::move(inner)), power_iterations_(power_iterations) {
  vector_u_.name = "vector_u";
  vector_u_.trainable = false;
}

Shape SpectralNormalization::build(const Shape& input_shape, Rng& init) {
  input_shape_ = input_shape;
  output_shape_ = inner_->build(input_shape, init);
  kernel_ = nullptr;
  for (Parameter* p : inner_->parameters())
    if (p->name == "kernel" || p->name == "embeddings") kernel_ = p;
  if (!kernel_)
    throw ShapeError("layer '" + name() + "' (SpectralNormalization) wraps a " +
                     inner_->class_name() +
                     ", which has no kernel nor embeddings to normalize (Keras' rule)");
  const Shape& shape = kernel_->value.shape();
  desc_ = {kernel_->value.size() / shape.back(), shape.back(), power_iterations_};
  vector_u_.value = Tensor({1, desc_.cols});
  Initializer u_init{"truncated_normal", std::nullopt, 0};
  u_init.stddev = 0.02;
  u_init.fill(vector_u_.value, init);
  return output_shape_;
}

const Tensor& SpectralNormalization::forward(const Tensor& x, bool training) {
  inner_->set_backend(ops());
  inner_->set_sample_offset(sample_offset());
  if (training) ops().spectral_normalize(desc_, kernel_->value, vector_u_.value);
  return inner_->forward(x, training);
}

const Tensor& SpectralNormalization::backward(const Tensor& grad_output, bool need_input_grad) {
  return inner_->backward(grad_output, need_input_grad);
}

std::vector<Parameter*> SpectralNormalization::parameters() {
  std::vector<Parameter*> out = inner_->parameters();
  out.push_back(&vector_u_);
  return out;
}

nlohmann::json SpectralNormalization::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"layer", {{"class_name", inner_->class_name()}, {"config", inner_->config()}}},
          {"power_iterations", power_iterations_}};
}

}  // namespace tandem::nn
