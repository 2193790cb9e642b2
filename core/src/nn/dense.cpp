#include "nn/dense.hpp"

#include "backend/cpu/gemm.hpp"
#include "backend/cpu/parallel.hpp"
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
  options_.kernel_initializer.fill(kernel_.value, in_features_, options_.units, init);
  if (options_.use_bias) {
    bias_.value = Tensor({options_.units});
    bias_.grad = Tensor({options_.units});
    options_.bias_initializer.fill(bias_.value, in_features_, options_.units, init);
  }
  Shape out = input_shape;
  out.back() = options_.units;
  return out;
}

const Tensor& Dense::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() < 2 || x.shape().back() != in_features_)
    throw ShapeError("layer '" + name() + "' (Dense) expects inputs (None, ..., " +
                     std::to_string(in_features_) + "), got " + shape_to_string(x.shape()));
  input_ = x;
  const std::int64_t rows = x.size() / in_features_;
  const std::int64_t units = options_.units;
  Shape out_shape = x.shape();
  out_shape.back() = units;
  const bool keep_pre = options_.activation != ActivationKind::linear;
  Tensor& z = keep_pre ? pre_ : output_;
  z.resize(out_shape);
  float* zp = z.data();
  if (options_.use_bias) {
    const float* b = bias_.value.data();
    cpu::parallel_for(rows, 256, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) std::copy(b, b + units, zp + r * units);
    });
  }
  cpu::gemm(false, false, rows, units, in_features_, 1.0f, x.data(), in_features_,
            kernel_.value.data(), units, options_.use_bias ? 1.0f : 0.0f, zp, units);
  if (keep_pre) {
    output_.resize(out_shape);
    activation_forward(options_.activation, zp, output_.data(), rows, units);
  }
  return output_;
}

const Tensor& Dense::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t rows = input_.size() / in_features_;
  const std::int64_t units = options_.units;
  if (grad_output.size() != rows * units)
    throw ShapeError("layer '" + name() + "' (Dense): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  const float* g = grad_output.data();
  if (options_.activation != ActivationKind::linear) {
    grad_pre_.resize(grad_output.shape());
    activation_backward(options_.activation, pre_.data(), output_.data(), g, grad_pre_.data(), rows,
                        units);
    g = grad_pre_.data();
  }
  // dKernel = xᵀ · g
  cpu::gemm(true, false, in_features_, units, rows, 1.0f, input_.data(), in_features_, g, units,
            0.0f, kernel_.grad.data(), units);
  if (options_.use_bias) {
    float* db = bias_.grad.data();
    // Column sums, split by columns so the summation order never depends on threads.
    cpu::parallel_for(units,
                      std::max<std::int64_t>(64, (1 << 16) / std::max<std::int64_t>(rows, 1)),
                      [&](std::int64_t c0, std::int64_t c1) {
                        for (std::int64_t c = c0; c < c1; ++c) db[c] = 0.0f;
                        for (std::int64_t r = 0; r < rows; ++r) {
                          const float* gr = g + r * units;
                          for (std::int64_t c = c0; c < c1; ++c) db[c] += gr[c];
                        }
                      });
  }
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  grad_input_.resize(input_.shape());
  // dx = g · kernelᵀ
  cpu::gemm(false, true, rows, in_features_, units, 1.0f, g, units, kernel_.value.data(), units,
            0.0f, grad_input_.data(), in_features_);
  return grad_input_;
}

std::vector<Parameter*> Dense::parameters() {
  if (options_.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

nlohmann::json Dense::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"units", options_.units},
          {"activation", activation_name(options_.activation)},
          {"use_bias", options_.use_bias},
          {"kernel_initializer", options_.kernel_initializer.config()},
          {"bias_initializer", options_.bias_initializer.config()},
          {"kernel_regularizer", nullptr},
          {"bias_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", nullptr},
          {"bias_constraint", nullptr}};
}

}  // namespace tandem::nn
