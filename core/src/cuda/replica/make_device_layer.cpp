// The device twin of each host layer class (device_layer.hpp).
#include "cuda/replica/device_layer.hpp"
#include "cuda/replica/layers/activation.hpp"
#include "cuda/replica/layers/batch_normalization.hpp"
#include "cuda/replica/layers/conv2d.hpp"
#include "cuda/replica/layers/dense.hpp"
#include "cuda/replica/layers/dropout.hpp"
#include "cuda/replica/layers/embedding.hpp"
#include "cuda/replica/layers/global_average_pooling.hpp"
#include "cuda/replica/layers/pooling.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {

std::unique_ptr<DeviceLayer> make_device_layer(const Layer& host, const Shape& input_shape,
                                               const Shape& output_shape, DeviceContext& ctx) {
  using namespace layers;
  const std::string cls = host.class_name();
  const nlohmann::json config = host.config();
  if (cls == "Dense") return std::make_unique<DeviceDense>(config, input_shape, output_shape, ctx);
  if (cls == "Activation") return std::make_unique<DeviceActivation>(config, input_shape, ctx);
  if (cls == "Dropout") return std::make_unique<DeviceDropout>(config, input_shape, ctx);
  if (cls == "Flatten" || cls == "Reshape") return std::make_unique<DevicePassThrough>();
  if (cls == "Conv2D")
    return std::make_unique<DeviceConv2D>(config, input_shape, output_shape, ctx);
  if (cls == "MaxPooling2D")
    return std::make_unique<DeviceMaxPooling2D>(config, input_shape, output_shape, ctx);
  if (cls == "AveragePooling2D")
    return std::make_unique<DeviceAveragePooling2D>(config, input_shape, output_shape, ctx);
  if (cls == "GlobalAveragePooling2D")
    return std::make_unique<DeviceGlobalAveragePooling2D>(config, input_shape, output_shape, ctx);
  if (cls == "BatchNormalization")
    return std::make_unique<DeviceBatchNormalization>(config, input_shape, output_shape, ctx,
                                                      host.trainable());
  if (cls == "Embedding")
    return std::make_unique<DeviceEmbedding>(config, input_shape, output_shape, ctx);
  throw ConfigError("model", "layer '" + host.name() + "' (" + cls +
                                 ") has no CUDA implementation; train this model on \"cpu\"");
}

}  // namespace tandem::cuda
