#include "nn/separable_conv2d.hpp"

namespace tandem::nn {

namespace {

Conv2DOptions pointwise_of(Conv2DOptions o) {
  o.kernel_size = {1, 1};
  o.strides = {1, 1};
  o.dilation_rate = {1, 1};
  o.padding = Padding::valid;
  return o;
}

Conv2DOptions depthwise_of(Conv2DOptions o) {
  o.use_bias = false;
  o.activation = ActivationKind::linear;
  return o;
}

}  // namespace

SeparableConv2D::SeparableConv2D(std::string name, SeparableConv2DOptions options)
    : Layer(std::move(name)),
      depthwise_(std::make_unique<DepthwiseConv2D>(this->name() + "/depthwise",
                                                   depthwise_of(options.depthwise))),
      pointwise_(std::make_unique<Conv2D>(this->name() + "/pointwise",
                                          pointwise_of(options.pointwise))) {
  pointwise_->parameters()[0]->name = "pointwise_kernel";
}

Shape SeparableConv2D::build(const Shape& input_shape, Rng& init) {
  return pointwise_->build(depthwise_->build(input_shape, init), init);
}

void SeparableConv2D::place_parts() {
  for (Layer* part : {static_cast<Layer*>(depthwise_.get()), static_cast<Layer*>(pointwise_.get())}) {
    part->set_backend(ops());
    part->set_sample_offset(sample_offset());
  }
}

const Tensor& SeparableConv2D::forward(const Tensor& x, bool training) {
  place_parts();
  return pointwise_->forward(depthwise_->forward(x, training), training);
}

const Tensor& SeparableConv2D::backward(const Tensor& grad_output, bool need_input_grad) {
  place_parts();
  return depthwise_->backward(pointwise_->backward(grad_output, true), need_input_grad);
}

std::vector<Parameter*> SeparableConv2D::parameters() {
  std::vector<Parameter*> all = depthwise_->parameters();
  for (Parameter* p : pointwise_->parameters()) all.push_back(p);
  return all;
}

std::vector<RuledWeight> SeparableConv2D::ruled_weights() {
  std::vector<RuledWeight> all = depthwise_->ruled_weights();
  for (const RuledWeight& w : pointwise_->ruled_weights()) all.push_back(w);
  return all;
}

nlohmann::json SeparableConv2D::config() const {
  const nlohmann::json d = depthwise_->config(), p = pointwise_->config();
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"filters", p["filters"]},
          {"kernel_size", d["kernel_size"]},
          {"strides", d["strides"]},
          {"padding", d["padding"]},
          {"data_format", "channels_last"},
          {"dilation_rate", d["dilation_rate"]},
          {"depth_multiplier", d["depth_multiplier"]},
          {"activation", p["activation"]},
          {"use_bias", p["use_bias"]},
          {"depthwise_initializer", d["depthwise_initializer"]},
          {"pointwise_initializer", p["kernel_initializer"]},
          {"bias_initializer", p["bias_initializer"]},
          {"depthwise_regularizer", d["depthwise_regularizer"]},
          {"pointwise_regularizer", p["kernel_regularizer"]},
          {"bias_regularizer", p["bias_regularizer"]},
          {"activity_regularizer", nullptr},
          {"depthwise_constraint", d["depthwise_constraint"]},
          {"pointwise_constraint", p["kernel_constraint"]},
          {"bias_constraint", p["bias_constraint"]}};
}

}  // namespace tandem::nn
