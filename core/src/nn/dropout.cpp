#include "nn/dropout.hpp"

#include <cmath>

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

backend::AxisGroups noise_groups(const Shape& shape,
                                 const std::vector<std::optional<std::int64_t>>& noise,
                                 const std::string& who) {
  if (noise.size() != shape.size())
    throw ShapeError(who + ": noise_shape has " + std::to_string(noise.size() + 1) +
                     " entries, its input " + shape_to_string(shape, true) + " " +
                     std::to_string(shape.size() + 1) + " axes");
  if (shape.size() > static_cast<std::size_t>(backend::AxisGroups::kMaxRank))
    throw ShapeError(who + ": noise_shape supports inputs of at most " +
                     std::to_string(backend::AxisGroups::kMaxRank) + " axes per sample");
  backend::AxisGroups g;
  g.rank = static_cast<int>(shape.size());
  for (std::size_t a = 0; a < shape.size(); ++a) {
    const std::optional<std::int64_t>& n = noise[a];
    if (n && *n != 1 && *n != shape[a])
      throw ShapeError(who + ": noise_shape[" + std::to_string(a + 1) + "] is " +
                       std::to_string(*n) + "; expected null, 1 or the input's " +
                       std::to_string(shape[a]));
    g.dims[a] = shape[a];
    g.grouped[a] = n && *n == 1;
  }
  backend::count_groups(g);
  return g;
}

Dropout::Dropout(std::string name, DropoutOptions options)
    : Layer(std::move(name)), options_(std::move(options)), random_(options_.seed) {}

std::string Dropout::class_name() const {
  if (options_.alpha) return "AlphaDropout";
  if (options_.spatial_rank == 0) return "Dropout";
  return "SpatialDropout" + std::to_string(options_.spatial_rank) + "D";
}

Shape Dropout::build(const Shape& input_shape, Rng& init) {
  const std::string who = "layer '" + name() + "' (" + class_name() + ")";
  random_.build(init);
  noise_ = backend::AxisGroups{};
  if (options_.spatial_rank > 0) {
    const auto rank = static_cast<std::size_t>(options_.spatial_rank) + 1;
    if (input_shape.size() != rank)
      throw ShapeError(who + " expects inputs of " + std::to_string(rank) +
                       " axes per sample (spatial axes, then channels), got " +
                       shape_to_string(input_shape, true));
    std::vector<std::optional<std::int64_t>> noise(rank, 1);
    noise.back() = std::nullopt;
    noise_ = noise_groups(input_shape, noise, who);
  } else if (options_.noise_shape) {
    noise_ = noise_groups(input_shape, *options_.noise_shape, who);
  }
  return input_shape;
}

const Tensor& Dropout::forward(const Tensor& x, bool training) {
  masked_ = training && options_.rate > 0.0;
  if (!masked_) return x;
  backend::DropoutDesc desc = random_.next_call(options_.rate, sample_offset());
  desc.noise = noise_;
  const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 1;
  const std::int64_t cols = rows > 0 ? x.size() / rows : 0;
  ops().dropout_forward(desc, x, ops().place(output_, x.shape()), ops().place(mask_, x.shape()),
                        cols);
  if (!options_.alpha) return output_;
  // mask = kept / (1 - rate) and output = x · mask: a·x·kept = a(1 - rate)·output, and
  // a·α'·(1 - kept) + b = -a·α'(1 - rate)·mask + a·α' + b.
  const AlphaTerms t = alpha_terms();
  ops().affine(mask_, static_cast<float>(-t.a * kAlphaPrime * t.kept),
               static_cast<float>(t.a * kAlphaPrime + t.b), ops().place(alpha_part_, x.shape()));
  ops().affine(output_, static_cast<float>(t.a * t.kept), 0.0f, output_);
  ops().add(output_, alpha_part_, output_);
  return output_;
}

Dropout::AlphaTerms Dropout::alpha_terms() const {
  const double rate = options_.rate;
  const double a = std::pow((1.0 - rate) * (1.0 + rate * kAlphaPrime * kAlphaPrime), -0.5);
  return {a, -a * kAlphaPrime * rate, 1.0 - rate};
}

const Tensor& Dropout::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!masked_) return grad_output;
  ops().multiply(grad_output, mask_, ops().place(grad_input_, grad_output.shape()));
  if (options_.alpha) {  // d/dx a·x·kept = a(1 - rate)·mask
    const AlphaTerms t = alpha_terms();
    ops().affine(grad_input_, static_cast<float>(t.a * t.kept), 0.0f, grad_input_);
  }
  return grad_input_;
}

nlohmann::json Dropout::config() const {
  const std::optional<std::uint64_t> seed = random_.seed();
  nlohmann::json c = {{"name", name()},
                      {"trainable", trainable()},
                      {"dtype", "float32"},
                      {"rate", options_.rate},
                      {"seed", seed ? nlohmann::json(*seed) : nlohmann::json(nullptr)}};
  if (options_.spatial_rank > 0) {
    c["data_format"] = "channels_last";
  } else if (options_.noise_shape) {
    nlohmann::json shape = nlohmann::json::array({nullptr});
    for (const auto& n : *options_.noise_shape)
      shape.push_back(n ? nlohmann::json(*n) : nlohmann::json(nullptr));
    c["noise_shape"] = shape;
  } else {
    c["noise_shape"] = nullptr;
  }
  return c;
}

}  // namespace tandem::nn
