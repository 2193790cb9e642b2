#include "nn/einsum_dense.hpp"

#include "backend/ops.hpp"
#include "nn/axis_permutation.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

EinsumDense::EinsumDense(std::string name, EinsumDenseOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  kernel_.name = "kernel";
  bias_.name = "bias";
}

Shape EinsumDense::build(const Shape& input_shape, Rng& init) {
  plan_ =
      plan_einsum(options_.specs, input_shape, options_.output_shape, options_.bias_axes, who());
  input_shape_ = input_shape;
  kernel_.value = Tensor(plan_.kernel_shape);
  kernel_.grad = Tensor(plan_.kernel_shape);
  options_.kernel_initializer.fill(kernel_.value, init);
  options_.kernel_constraint.build(kernel_.value.shape());
  if (plan_.bias_shape) {
    bias_.value = Tensor(*plan_.bias_shape);
    bias_.grad = Tensor(*plan_.bias_shape);
    options_.bias_initializer.fill(bias_.value, init);
    options_.bias_constraint.build(bias_.value.shape());
  }
  return plan_.output_shape;
}

std::int64_t EinsumDense::per_sample() const {
  return shape_size(plan_.output_shape);
}

bool EinsumDense::keeps_product() const {
  return options_.activation != ActivationKind::linear &&
         !backend::derivative_from_output(options_.activation);
}

const Tensor& EinsumDense::arranged(const Tensor& t, const std::string& from, const std::string& to,
                                    std::int64_t rows, Tensor& into) {
  if (from == to) return t;
  permute_axes(ops(), t, plan_.dims(from, rows), axis_order(from, to), into, scratch_);
  return into;
}

// The bias's values, repeated for every broadcast cell as [broadcast, biased] (a product with a
// column of ones: each value times 1, exactly), then arranged in the output's order.
void EinsumDense::expand_bias() {
  backend::Backend& ops = this->ops();
  const std::int64_t values = bias_.value.size();
  const std::int64_t cells = per_sample() / std::max<std::int64_t>(values, 1);
  ops.fill(ops.place(ones_, {std::max(cells, per_sample())}), 1.0f);
  Tensor column = Tensor::view(ones_, 0, {cells, 1});
  ops.gemm({false, false, cells, values, 1}, column, bias_.value, nullptr,
           ops.place(bias_rows_, {cells * values}));
  const Tensor& full = arranged(bias_rows_, plan_.broadcast + plan_.biased,
                                plan_.output_axes.substr(1), 0, bias_full_);
  if (&full != &bias_full_) bias_full_ = full;
}

const Tensor& EinsumDense::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, who());
  backend::Backend& ops = this->ops();
  const std::int64_t rows = x.dim(0);
  input_ = x;
  x_smk_ = &arranged(input_, plan_.input_axes, plan_.smk, rows, x_perm_);
  w_skn_ = &arranged(kernel_.value, plan_.kernel_axes, plan_.skn, rows, w_perm_);
  const Shape out_shape = with_batch(rows, plan_.output_shape);
  Tensor& result = keeps_product() ? pre_ : output_;
  if (!keeps_product()) pre_ = Tensor();
  const bool in_order = plan_.smn == plan_.output_axes;
  Tensor& product = in_order ? ops.place(result, out_shape)
                             : ops.place(product_, {rows * plan_.m_per_sample * plan_.s * plan_.n});
  backend::GemmDesc d{false, false, rows * plan_.m_per_sample, plan_.n, plan_.k};
  d.batch = plan_.s;
  ops.gemm(d, *x_smk_, *w_skn_, nullptr, product);
  if (!in_order) {
    permute_axes(ops, product_, plan_.dims(plan_.smn, rows),
                 axis_order(plan_.smn, plan_.output_axes), result, scratch_);
    result = result.reshaped(out_shape);
  }
  if (plan_.bias_shape && rows > 0) {
    expand_bias();
    ops.column_affine(result, Tensor::view(ones_, 0, {per_sample()}), &bias_full_, result,
                      per_sample());
  }
  if (options_.activation == ActivationKind::linear) return output_;
  const std::int64_t last = plan_.output_shape.empty() ? 1 : plan_.output_shape.back();
  if (keeps_product())
    ops.activation_forward(options_.activation, pre_, ops.place(output_, out_shape), last);
  else
    ops.activation_forward(options_.activation, output_, output_, last);
  return output_;
}

void EinsumDense::bias_gradient(const Tensor& dz) {
  backend::Backend& ops = this->ops();
  ops.column_sums(dz, per_sample(), ops.place(bias_sums_, {per_sample()}));
  const Tensor& grouped = arranged(bias_sums_, plan_.output_axes.substr(1),
                                   plan_.broadcast + plan_.biased, 0, bias_arranged_);
  ops.column_sums(grouped, bias_.value.size(), bias_.grad);
}

const Tensor& EinsumDense::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t rows = input_.rank() > 0 ? input_.dim(0) : 0;
  if (grad_output.size() != rows * per_sample())
    throw ShapeError(who() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output");
  backend::Backend& ops = this->ops();
  const Tensor* dz = &grad_output;
  if (options_.activation != ActivationKind::linear) {
    const Tensor& pre = keeps_product() ? pre_ : output_;
    ops.activation_backward(options_.activation, pre, output_, grad_output,
                            ops.place(grad_pre_, grad_output.shape()),
                            plan_.output_shape.empty() ? 1 : plan_.output_shape.back());
    dz = &grad_pre_;
  }
  if (plan_.bias_shape && !bias_.grad.empty()) bias_gradient(*dz);
  const Tensor dz_shaped = dz->reshaped(with_batch(rows, plan_.output_shape));
  const Tensor& dz_smn = arranged(dz_shaped, plan_.output_axes, plan_.smn, rows, dz_perm_);
  const std::int64_t m = rows * plan_.m_per_sample;
  if (!kernel_.grad.empty()) {
    // dW[S, K, N] = x[S, M, K]ᵀ · dz[S, M, N]
    const bool in_order = plan_.skn == plan_.kernel_axes;
    Tensor& dw = in_order ? kernel_.grad : ops.place(dw_perm_, {kernel_.grad.size()});
    backend::GemmDesc d{true, false, plan_.k, plan_.n, m};
    d.batch = plan_.s;
    ops.gemm(d, *x_smk_, dz_smn, nullptr, dw);
    if (!in_order) {  // arranged beside the gradient, whose storage is the optimizer's to read
      permute_axes(ops, dw_perm_, plan_.dims(plan_.skn, 0),
                   axis_order(plan_.skn, plan_.kernel_axes), dw_arranged_, scratch_);
      ops.copy(dw_arranged_, kernel_.grad);
    }
  }
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  // dx[S, M, K] = dz[S, M, N] · W[S, K, N]ᵀ
  const bool in_order = plan_.smk == plan_.input_axes;
  Tensor& dx =
      in_order ? ops.place(grad_input_, input_.shape()) : ops.place(dx_perm_, {input_.size()});
  backend::GemmDesc d{false, true, m, plan_.k, plan_.n};
  d.batch = plan_.s;
  ops.gemm(d, dz_smn, *w_skn_, nullptr, dx);
  if (!in_order) {
    permute_axes(ops, dx_perm_, plan_.dims(plan_.smk, rows),
                 axis_order(plan_.smk, plan_.input_axes), grad_input_, scratch_);
    grad_input_ = grad_input_.reshaped(input_.shape());
  }
  return grad_input_;
}

std::vector<Parameter*> EinsumDense::parameters() {
  if (options_.bias_axes) return {&kernel_, &bias_};
  return {&kernel_};
}

nlohmann::json EinsumDense::config() const {
  nlohmann::json shape = nlohmann::json::array();
  for (const auto& d : options_.output_shape) shape.push_back(d ? nlohmann::json(*d) : nullptr);
  nlohmann::json c = {
      {"name", name()},
      {"trainable", trainable()},
      {"dtype", "float32"},
      {"output_shape", shape},
      {"equation", options_.equation},
      {"activation", activation_name(options_.activation)},
      {"bias_axes", options_.bias_axes ? nlohmann::json(*options_.bias_axes) : nullptr}};
  options_.write(c);
  return c;
}

std::vector<RuledWeight> EinsumDense::ruled_weights() {
  return options_.ruled(kernel_, options_.bias_axes ? &bias_ : nullptr);
}

}  // namespace tandem::nn
