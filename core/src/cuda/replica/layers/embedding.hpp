// Private (CUDA module): the device twin of nn::Embedding: looks up rows of the (input_dim,
// output_dim) table "embeddings" for inputs holding integer-valued floats, (d1, ...) ->
// (d1, ..., output_dim) per sample. As the host layer, an input that is not an integer in
// [0, input_dim) is a DataError naming the layer, the element (with the sample's place in the
// global batch) and the value: the device finds the first one and forward() waits for that one
// flag (a stream synchronisation per forward). backward() sets the dense table gradient: each
// row the sum of its lookups' output gradients in input order, the host's order, so the same
// bits; indices have no gradient (need_input_grad is a ShapeError, as on the host).
//
// Ownership: owns its buffers (from ctx.allocator), borrows ctx (which outlives it) and the bound
// parameter. Thread-safety: one thread at a time; all work on ctx.stream.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"

namespace tandem::cuda::layers {

class DeviceEmbedding final : public DeviceLayer {
 public:
  /// config: the host layer's config() (input_dim, output_dim); shapes per sample. Throws
  /// ConfigError / ShapeError naming the layer when they disagree.
  DeviceEmbedding(const nlohmann::json& config, const Shape& input_shape, const Shape& output_shape,
                  DeviceContext& ctx);
  /// embeddings: input_dim * output_dim values.
  void bind(std::vector<DeviceParameter> params) override;
  /// Throws DataError (the host's text) for an index that is not an integer in [0, input_dim).
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  /// Throws ShapeError when need_input_grad.
  const float* backward(const float* dy, bool need_input_grad) override;
  bool capturable() const override { return false; }

 private:
  [[noreturn]] void throw_bad_index(const float* x, std::int64_t position,
                                    std::int64_t sample_offset);

  DeviceContext& ctx_;
  std::string name_, who_;
  Shape input_shape_;
  std::int64_t vocab_ = 0, dim_ = 0;
  std::int64_t per_sample_ = 0;  // indices per sample
  std::int64_t count_ = 0;       // indices of the last forward
  DeviceBuffer indices_;         // int32 indices of the last forward (in a float buffer)
  DeviceBuffer flag_;            // the first bad position (an unsigned long long)
  DeviceBuffer work_, starts_, sort_scratch_, out_;
};

}  // namespace tandem::cuda::layers
