#include "nn/dot.hpp"

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape Dot::build_inputs(const std::vector<Shape>& shapes, Rng&) {
  const std::string who = "layer '" + name() + "' (Dot)";
  if (shapes.size() != 2)
    throw ShapeError(who + " takes exactly 2 inputs, got " + std::to_string(shapes.size()));
  if (shapes[0].size() != shapes[1].size() || shapes[0].empty() || shapes[0].size() > 2)
    throw ShapeError(who + " takes two inputs of one rank, (batch, n) or (batch, rows, cols), got " +
                     shape_to_string(shapes[0], true) + " and " + shape_to_string(shapes[1], true));
  const int rank = static_cast<int>(shapes[0].size());
  std::array<int, 2> axis{};  // 0-based per-sample axis contracted in each input
  for (int i = 0; i < 2; ++i) {
    axis[i] = axes_[i] < 0 ? rank + axes_[i] : axes_[i] - 1;
    if (axis[i] < 0 || axis[i] >= rank)
      throw ShapeError(who + ": axis " + std::to_string(axes_[i]) + " is not an axis of input " +
                       std::to_string(i) + " " + shape_to_string(shapes[i], true));
  }
  const auto& a = shapes[0];
  const auto& b = shapes[1];
  if (a[static_cast<std::size_t>(axis[0])] != b[static_cast<std::size_t>(axis[1])])
    throw ShapeError(who + ": the contracted axes differ in length, " +
                     shape_to_string(a, true) + " along " + std::to_string(axes_[0]) + " and " +
                     shape_to_string(b, true) + " along " + std::to_string(axes_[1]));
  k_ = a[static_cast<std::size_t>(axis[0])];
  if (rank == 1) {  // (1 x n) · (n x 1)
    trans_a_ = false, trans_b_ = false, m_ = 1, n_ = 1;
    output_shape_ = {1};
  } else {
    trans_a_ = axis[0] == 0;  // A stored (rows, cols); contracting its rows means Aᵀ
    trans_b_ = axis[1] == 1;  // B contracts its cols: Bᵀ
    m_ = a[static_cast<std::size_t>(1 - axis[0])];
    n_ = b[static_cast<std::size_t>(1 - axis[1])];
    output_shape_ = {m_, n_};
  }
  input_shapes_ = shapes;
  for (int i = 0; i < 2; ++i) unit_[i] = along(shapes[i], axis[i]);
  return output_shape_;
}

// A sample of `shape` grouped along its axis `axis` (0-based after the batch), floored as this
// layer's Keras computes normalize.
backend::UnitNormDesc Dot::along(const Shape& shape, int axis) const {
  backend::UnitNormDesc d;
  d.rank = static_cast<int>(shape.size());
  for (int a = 0; a < d.rank; ++a) {
    d.dims[a] = shape[static_cast<std::size_t>(a)];
    d.grouped[a] = a == axis;
  }
  backend::count_groups(d);
  d.square_floor = square_floor_;
  return d;
}

backend::GemmDesc Dot::product(std::int64_t batch) const {
  return {trans_a_, trans_b_, m_, n_, k_, backend::GemmEpilogue::none, batch};
}

const Tensor& Dot::forward_inputs(const std::vector<const Tensor*>& inputs, bool) {
  const std::string who = "layer '" + name() + "' (Dot)";
  if (inputs.size() != 2) throw ShapeError(who + " takes exactly 2 inputs");
  require_batch_of(*inputs[0], input_shapes_[0], who);
  require_batch_of(*inputs[1], input_shapes_[1], who);
  const std::int64_t batch = inputs[0]->dim(0);
  if (inputs[1]->dim(0) != batch) throw ShapeError(who + ": its inputs differ in batch size");
  inputs_seen_ = inputs;
  std::array<const Tensor*, 2> operands{inputs[0], inputs[1]};
  for (std::size_t i = 0; i < 2 && normalize_; ++i) {
    ops().unit_normalize(unit_[i], *inputs[i], ops().place(normalized_[i], inputs[i]->shape()));
    operands[i] = &normalized_[i];
  }
  ops().gemm(product(batch), *operands[0], *operands[1], nullptr,
             ops().place(output_, with_batch(batch, output_shape_)));
  return output_;
}

std::vector<const Tensor*> Dot::backward_inputs(const Tensor& dc, bool need_input_grad) {
  if (!need_input_grad) return {};
  // The products' operands: the inputs, or their normalized values (whose gradients then go
  // back through the normalization).
  const Tensor& a = normalize_ ? normalized_[0] : *inputs_seen_[0];
  const Tensor& b = normalize_ ? normalized_[1] : *inputs_seen_[1];
  const std::int64_t batch = a.dim(0);
  const auto none = backend::GemmEpilogue::none;
  std::array<Tensor, 2>& product_grads = normalize_ ? normalized_grads_ : grads_;
  Tensor& da = ops().place(product_grads[0], a.shape());
  Tensor& db = ops().place(product_grads[1], b.shape());
  // C = op(A) op(B), per sample: op(A) is m x k, op(B) k x n, C m x n.
  if (!trans_a_)  // dA (m x k) = dC op(B)ᵀ
    ops().gemm({false, !trans_b_, m_, k_, n_, none, batch}, dc, b, nullptr, da);
  else  // A stored k x m: dA = op(B) dCᵀ
    ops().gemm({trans_b_, true, k_, m_, n_, none, batch}, b, dc, nullptr, da);
  if (!trans_b_)  // dB (k x n) = op(A)ᵀ dC
    ops().gemm({!trans_a_, false, k_, n_, m_, none, batch}, a, dc, nullptr, db);
  else  // B stored n x k: dB = dCᵀ op(A)
    ops().gemm({true, trans_a_, n_, k_, m_, none, batch}, dc, a, nullptr, db);
  for (std::size_t i = 0; i < 2 && normalize_; ++i)
    ops().unit_normalize_backward(unit_[i], *inputs_seen_[i], normalized_grads_[i],
                                  ops().place(grads_[i], inputs_seen_[i]->shape()));
  return {&grads_[0], &grads_[1]};
}

nlohmann::json Dot::config() const {
  nlohmann::json c = MergeLayer::config();
  c["axes"] = axes_[0] == axes_[1] ? nlohmann::json(axes_[0]) : nlohmann::json(axes_);
  c["normalize"] = normalize_;
  return c;
}

}  // namespace tandem::nn
