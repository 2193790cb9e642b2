#include "cuda/replica/layers/dense.hpp"

#include "cuda/ops/activations.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/replica/layers/layer_config.hpp"

namespace tandem::cuda::layers {

DeviceDense::DeviceDense(const nlohmann::json& config, const Shape& input_shape,
                         const Shape& output_shape, DeviceContext& ctx)
    : who_(layer_who(config, "Dense")),
      ctx_(ctx),
      activation_(nn::parse_activation(
          config_value<std::string>(config, "activation", who_, "linear"), who_ + ".activation")) {
  if (input_shape.empty()) throw ShapeError(who_ + " needs inputs with at least one axis");
  in_ = input_shape.back();
  units_ = config_value<std::int64_t>(config, "units", who_);
  use_bias_ = config_value<bool>(config, "use_bias", who_, true);
  for (std::size_t a = 0; a + 1 < input_shape.size(); ++a) rows_per_sample_ *= input_shape[a];
  Shape expected(input_shape.begin(), input_shape.end() - 1);
  expected.push_back(units_);
  check_shape(who_, "output", output_shape, expected);
  fused_ = use_bias_ &&
           (activation_ == nn::ActivationKind::linear || activation_ == nn::ActivationKind::relu);
  if (!use_bias_ && activation_ == nn::ActivationKind::linear) fused_ = true;
}

void DeviceDense::bind(std::vector<DeviceParameter> params) {
  std::vector<std::int64_t> sizes{in_ * units_};
  if (use_bias_) sizes.push_back(units_);
  check_parameters(who_, params, sizes);
  params_ = std::move(params);
}

const float* DeviceDense::forward(const float* x, std::int64_t batch, bool /*training*/,
                                  std::int64_t /*sample_offset*/) {
  input_ = x;
  rows_ = batch * rows_per_sample_;
  const std::int64_t n = rows_ * units_;
  output_.resize(*ctx_.allocator, n);
  const float* bias = use_bias_ ? params_[1].value : nullptr;
  if (fused_) {
    const auto epilogue = !use_bias_                                ? DenseGemm::Epilogue::none
                          : activation_ == nn::ActivationKind::relu ? DenseGemm::Epilogue::relu_bias
                                                                    : DenseGemm::Epilogue::bias;
    ctx_.gemm->forward(x, params_[0].value, bias, output_.data(), rows_, in_, units_, epilogue);
    return output_.data();
  }
  // Any other activation (or relu without a bias): the product, then the activation, keeping
  // the product for the activation's derivative.
  pre_.resize(*ctx_.allocator, n);
  ctx_.gemm->forward(x, params_[0].value, bias, pre_.data(), rows_, in_, units_,
                     use_bias_ ? DenseGemm::Epilogue::bias : DenseGemm::Epilogue::none);
  activation_forward(activation_, pre_.data(), output_.data(), rows_, units_, ctx_.stream);
  return output_.data();
}

const float* DeviceDense::backward(const float* dy, bool need_input_grad) {
  const std::int64_t n = rows_ * units_;
  const float* dz = dy;
  if (activation_ != nn::ActivationKind::linear) {
    grad_pre_.resize(*ctx_.allocator, n);
    // A fused relu kept no product: relu'(z) is read from its output (y > 0 exactly when z > 0).
    const float* pre = fused_ ? output_.data() : pre_.data();
    activation_backward(activation_, pre, output_.data(), dy, grad_pre_.data(), rows_, units_,
                        ctx_.stream);
    dz = grad_pre_.data();
  }
  if (params_[0].grad) ctx_.gemm->backward_weights(input_, dz, params_[0].grad, rows_, in_, units_);
  if (use_bias_ && params_[1].grad) {
    scratch_.resize(*ctx_.allocator, column_sums_scratch(rows_, units_));
    column_sums(dz, params_[1].grad, rows_, units_, scratch_.data(), ctx_.stream);
  }
  if (!need_input_grad) return nullptr;
  grad_input_.resize(*ctx_.allocator, rows_ * in_);
  ctx_.gemm->backward_data(dz, params_[0].value, grad_input_.data(), rows_, in_, units_);
  return grad_input_.data();
}

}  // namespace tandem::cuda::layers
