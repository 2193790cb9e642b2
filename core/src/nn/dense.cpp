#include "nn/dense.hpp"

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Dense::Dense(std::string name, DenseOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  kernel_.name = "kernel";
  bias_.name = "bias";
}

Shape Dense::build(const Shape& input_shape, Rng& init) {
  if (input_shape.empty())
    throw ShapeError("layer '" + name() + "' (Dense) needs inputs with at least one axis, got " +
                     shape_to_string(input_shape, true));
  in_features_ = input_shape.back();
  kernel_.value = Tensor({in_features_, options_.units});
  kernel_.grad = Tensor({in_features_, options_.units});
  options_.kernel_initializer.fill(kernel_.value, init);
  options_.kernel_constraint.build(kernel_.value.shape());
  if (options_.use_bias) {
    bias_.value = Tensor({options_.units});
    bias_.grad = Tensor({options_.units});
    options_.bias_initializer.fill(bias_.value, init);
    options_.bias_constraint.build(bias_.value.shape());
  }
  products_.reset();
  Shape out = input_shape;
  out.back() = options_.units;
  return out;
}

const Tensor& Dense::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() < 2 || x.shape().back() != in_features_)
    throw ShapeError("layer '" + name() + "' (Dense) expects inputs (None, ..., " +
                     std::to_string(in_features_) + "), got " + shape_to_string(x.shape()));
  backend::Backend& ops = this->ops();
  input_ = x;
  Shape out_shape = x.shape();
  out_shape.back() = options_.units;
  const Tensor* bias = options_.use_bias ? &bias_.value : nullptr;
  if (fused()) {
    products().forward(x, kernel_.value, bias, ops.place(output_, out_shape));
    return output_;
  }
  if (!keeps_product()) {  // the activation in place: its derivative reads only the output
    pre_ = Tensor();
    products().forward(x, kernel_.value, bias, ops.place(output_, out_shape));
    ops.activation_forward(options_.activation, output_, output_, options_.units);
    return output_;
  }
  // Any other activation: the product, kept for the activation's derivative, then the activation.
  products().forward(x, kernel_.value, bias, ops.place(pre_, out_shape));
  ops.activation_forward(options_.activation, pre_, ops.place(output_, out_shape),
                         options_.units);
  return output_;
}

const Tensor& Dense::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t rows = input_.size() / in_features_;
  const std::int64_t units = options_.units;
  if (grad_output.size() != rows * units)
    throw ShapeError("layer '" + name() + "' (Dense): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  backend::Backend& ops = this->ops();
  const Tensor* dz = &grad_output;
  if (options_.activation != ActivationKind::linear) {
    // Without a kept product the derivative reads the output (backend::derivative_from_output).
    const Tensor& pre = keeps_product() ? pre_ : output_;
    ops.activation_backward(options_.activation, pre, output_, grad_output,
                            ops.place(grad_pre_, grad_output.shape()), units);
    dz = &grad_pre_;
  }
  // dKernel = xᵀ · dz, dBias = column sums of dz, dx = dz · kernelᵀ
  if (options_.use_bias && !bias_.grad.empty()) ops.column_sums(*dz, units, bias_.grad);
  Tensor* d_kernel = kernel_.grad.empty() ? nullptr : &kernel_.grad;
  if (!need_input_grad) grad_input_ = Tensor();
  Tensor* dx = need_input_grad ? &ops.place(grad_input_, input_.shape()) : nullptr;
  products().backward(input_, *dz, kernel_.value, d_kernel, dx);
  return grad_input_;
}

backend::DenseProducts& Dense::products() {
  return products_.of(ops(), {in_features_, options_.units, epilogue()});
}

bool Dense::fused() const {
  return options_.activation == ActivationKind::linear ||
         (options_.use_bias && options_.activation == ActivationKind::relu);
}

bool Dense::keeps_product() const {
  return !fused() && !backend::derivative_from_output(options_.activation);
}

backend::GemmEpilogue Dense::epilogue() const {
  if (!options_.use_bias) return backend::GemmEpilogue::none;
  return options_.activation == ActivationKind::relu ? backend::GemmEpilogue::relu_bias
                                                     : backend::GemmEpilogue::bias;
}

std::vector<Parameter*> Dense::parameters() {
  if (options_.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

nlohmann::json Dense::config() const {
  nlohmann::json c = {{"name", name()},
                      {"trainable", trainable()},
                      {"dtype", "float32"},
                      {"units", options_.units},
                      {"activation", activation_name(options_.activation)},
                      {"use_bias", options_.use_bias}};
  options_.write(c);
  return c;
}

std::vector<RuledWeight> Dense::ruled_weights() {
  return options_.ruled(kernel_, options_.use_bias ? &bias_ : nullptr);
}

}  // namespace tandem::nn
