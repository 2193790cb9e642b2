#include "nn/reduction_layer.hpp"

#include <algorithm>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

const char* kind_name(Reduction::Kind kind) {
  switch (kind) {
    case Reduction::Kind::sum:
      return "sum";
    case Reduction::Kind::mean:
      return "mean";
    case Reduction::Kind::max:
      return "max";
    case Reduction::Kind::min:
      return "min";
  }
  return "sum";
}

}  // namespace

void Reduction::refuse(const std::string& why) const {
  std::string axes;
  for (std::int64_t a : axes_) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
  throw ShapeError("layer '" + name() + "' (" + kind_name(kind_) + " over axes [" + axes +
                   "]) on inputs " + shape_to_string(input_shape_, true) + ": " + why);
}

Shape Reduction::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  const auto rank = static_cast<std::int64_t>(input_shape.size()) + 1;  // the batch counted
  if (axes_.empty()) refuse("no axis to reduce over");
  resolved_.clear();
  for (std::int64_t a : axes_) {
    const std::int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank)
      refuse("axis " + std::to_string(a) + " is out of range for " + std::to_string(rank) +
             " axes (the batch counted)");
    if (axis == 0) refuse("reduces over the batch axis, whose samples stay apart");
    if (std::find(resolved_.begin(), resolved_.end(), axis) != resolved_.end())
      refuse("names axis " + std::to_string(axis) + " twice");
    resolved_.push_back(axis);
  }
  std::sort(resolved_.begin(), resolved_.end());
  const std::int64_t first = resolved_.front(), last = resolved_.back();
  if (last - first + 1 != static_cast<std::int64_t>(resolved_.size()))
    refuse("the axes are not adjacent (Tandem reduces over one block of adjacent axes)");
  outer_ = cells_ = inner_ = 1;
  output_shape_.clear();
  for (std::int64_t a = 1; a < rank; ++a) {
    const std::int64_t length = input_shape[static_cast<std::size_t>(a - 1)];
    if (a < first) outer_ *= length;
    if (a > last) inner_ *= length;
    if (a >= first && a <= last) {
      cells_ *= length;
      if (keepdims_) output_shape_.push_back(1);
    } else {
      output_shape_.push_back(length);
    }
  }
  if (cells_ > (std::int64_t{1} << 24))
    refuse(std::to_string(cells_) + " values per reduction; Tandem reduces at most 2^24");
  if (output_shape_.empty()) output_shape_.push_back(1);  // a number per sample: (batch, 1)
  desc_ = backend::AdaptivePoolDesc();
  desc_.max = kind_ == Kind::max || kind_ == Kind::min;
  desc_.channels = inner_;
  desc_.in[2] = cells_;
  return output_shape_;
}

const Tensor& Reduction::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (" + class_name() + ")");
  const std::int64_t batch = x.dim(0);
  desc_.batch = batch * outer_;
  const Tensor* in = &x;
  if (kind_ == Kind::min) {
    ops().affine(x, -1.0f, 0.0f, ops().place(negated_, x.shape()));
    in = &negated_;
  }
  Tensor& y = ops().place(output_, with_batch(batch, output_shape_));
  if (batch == 0) return output_;
  ops().adaptive_pool_forward(desc_, *in, y, arg_);
  if (kind_ == Kind::sum) ops().affine(y, static_cast<float>(cells_), 0.0f, y);
  if (kind_ == Kind::min) ops().affine(y, -1.0f, 0.0f, y);
  return output_;
}

const Tensor& Reduction::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  require_batch_of(grad_output, output_shape_,
                   "layer '" + name() + "' (" + class_name() + ") gradient");
  const std::int64_t batch = grad_output.dim(0);
  Tensor& dx = ops().place(grad_input_, with_batch(batch, input_shape_));
  if (batch == 0) return grad_input_;
  desc_.batch = batch * outer_;
  // The sum is cells · mean; the minimum -max(-x): the chain rule's factors on dy, and for the
  // minimum once more on dx.
  const Tensor* dy = &grad_output;
  if (kind_ == Kind::sum || kind_ == Kind::min) {
    ops().affine(grad_output, kind_ == Kind::sum ? static_cast<float>(cells_) : -1.0f, 0.0f,
                 ops().place(scaled_, grad_output.shape()));
    dy = &scaled_;
  }
  ops().adaptive_pool_backward(desc_, *dy, arg_, dx);
  if (kind_ == Kind::min) ops().affine(dx, -1.0f, 0.0f, dx);
  return grad_input_;
}

nlohmann::json Reduction::config() const {
  return {{"name", name()},     {"trainable", trainable()},
          {"dtype", "float32"}, {"reduction", kind_name(kind_)},
          {"axes", axes_},      {"keepdims", keepdims_}};
}

std::unique_ptr<Layer> make_reduction_layer(ConfigObject& c, const std::string& name) {
  const std::string kind = c.one_of("reduction", "", {"sum", "mean", "max", "min"});
  const Reduction::Kind k = kind == "sum"    ? Reduction::Kind::sum
                            : kind == "mean" ? Reduction::Kind::mean
                            : kind == "max"  ? Reduction::Kind::max
                                             : Reduction::Kind::min;
  const nlohmann::json& list = c.at("axes");
  if (!list.is_array() || list.empty())
    throw ConfigError(c.path_of("axes"), "expected a list of axes (integers), got " + list.dump());
  std::vector<std::int64_t> axes;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number_integer() || list[i].get<std::int64_t>() < -64 ||
        list[i].get<std::int64_t>() > 64)
      throw ConfigError(c.path_of("axes") + "[" + std::to_string(i) + "]",
                        "expected an axis (an integer), got " + list[i].dump());
    axes.push_back(list[i].get<std::int64_t>());
  }
  return std::make_unique<Reduction>(name, k, axes, c.get_bool("keepdims", false));
}

}  // namespace tandem::nn
