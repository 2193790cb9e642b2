// ONNX export oracle: small models covering every layer class Tandem builds (and the settings
// that change their ONNX form: padding, strides, dilation, groups, causal, keepdims, masks,
// shared layers, several inputs and outputs), with every weight random (moving statistics too),
// exported by onnx_export::export_onnx and checked by others' code (onnx_runtime_check.py):
// onnx.checker with full shape inference on every case, and OpenCV's DNN module running the
// cases it can import, whose outputs must equal Tandem's forward() on the same random inputs
// within 1e-4 of max(1, |output|). A negative control (a perturbed expected output) must miss
// that bar, so the comparison can fail.
//
// OpenCV 4.6 (Debian 12) cannot run some of the graphs: ONNX 13's Clip (capped ReLU), Gather of
// computed indices (Embedding), ReduceSum with an axes input (Dot of vectors), LayerNormalization
// (its ReduceMean's output broadcast back by Sub, on vectors as on sequences) and 3-D blobs
// through Softmax (MultiHeadAttention).
// Those cases run through NumPy instead (each node by the ONNX specification's definition), with
// a negative control of their own; which cases must run in OpenCV is fixed here, and a case
// NumPy cannot run fails, so that a case cannot silently drop out of the numeric check.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/layer_registry.hpp"
#include "onnx/onnx_export.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kBar = 1e-4;
constexpr std::int64_t kBatch = 3;

struct InputSpec {
  Shape shape;               // per sample
  std::int64_t ids = 0;      // > 0: integer ids in [0, ids) (Embedding)
  bool mask = false;         // 0/1 values (an attention mask)
};

struct Case {
  std::string label;
  json model;
  std::vector<InputSpec> inputs;
  bool opencv = true;  // OpenCV 4.6 imports and runs it
};

json input_layer(const std::string& name, const Shape& shape) {
  json batch_shape = json::array({nullptr});
  for (auto d : shape) batch_shape.push_back(d);
  return {{"class_name", "InputLayer"}, {"name", name}, {"inbound_nodes", json::array()},
          {"config", {{"name", name}, {"batch_input_shape", batch_shape}}}};
}

json sequential(const Shape& input, std::vector<json> layers) {
  layers.insert(layers.begin(), input_layer("x", input));
  return {{"class_name", "Sequential"}, {"config", {{"name", "m"}, {"layers", layers}}}};
}

json layer(const std::string& cls, json config = json::object()) {
  return {{"class_name", cls}, {"config", config}};
}

// A functional layer called on `inputs` (Keras 2's form; kwargs beside each reference, as Keras 2
// writes them).
json call(const std::string& cls, const std::string& name, json config,
          const std::vector<std::string>& inputs, json kwargs = json::object()) {
  config["name"] = name;
  json refs = json::array();
  for (const std::string& in : inputs) refs.push_back({in, 0, 0, kwargs});
  return {{"class_name", cls}, {"name", name}, {"config", config},
          {"inbound_nodes", json::array({refs})}};
}

json functional(std::vector<json> layers, const std::vector<std::string>& ins,
                const std::vector<std::string>& outs) {
  json in = json::array(), out = json::array();
  for (const auto& n : ins) in.push_back({n, 0, 0});
  for (const auto& n : outs) out.push_back({n, 0, 0});
  return {{"class_name", "Functional"},
          {"config", {{"name", "f"}, {"layers", layers}, {"input_layers", in},
                      {"output_layers", out}}}};
}

std::vector<Case> cases() {
  std::vector<Case> c;
  const Shape image{6, 6, 3};
  c.push_back({"conv_same_stride_bn_pool_dense",
               sequential(image, {layer("Conv2D", {{"filters", 4}, {"kernel_size", {3, 3}},
                                                   {"strides", {2, 2}}, {"padding", "same"},
                                                   {"activation", "relu"}}),
                                  layer("BatchNormalization"),
                                  layer("MaxPooling2D", {{"pool_size", {2, 2}}, {"padding", "same"}}),
                                  layer("Flatten"),
                                  layer("Dense", {{"units", 5}, {"activation", "softmax"}})}),
               {{image}}});
  c.push_back({"conv_dilated_average_pool_same",
               sequential({7, 7, 2}, {layer("Conv2D", {{"filters", 3}, {"kernel_size", {2, 3}},
                                                      {"dilation_rate", {2, 1}}}),
                                      layer("AveragePooling2D", {{"pool_size", {2, 2}},
                                                                 {"strides", {1, 2}},
                                                                 {"padding", "same"}}),
                                      layer("GlobalAveragePooling2D")}),
               {{{7, 7, 2}}}});
  c.push_back({"conv_groups_global_max_keepdims",
               sequential(image, {layer("Conv2D", {{"filters", 6}, {"kernel_size", {3, 3}},
                                                   {"groups", 3}, {"padding", "same"}}),
                                  layer("GlobalMaxPooling2D", {{"keepdims", true}})}),
               {{image}}});
  // EinsumDense: MultiHeadAttention's projections to heads and back, an ellipsis, a permuted
  // output with upper-case letters (ONNX's Einsum takes lower case: renamed). OpenCV 4.6 has no
  // Einsum: NumPy runs it.
  c.push_back({"einsum_dense",
               sequential({4, 5}, {layer("EinsumDense", {{"equation", "abc,cde->abde"},
                                                         {"output_shape", {nullptr, 2, 3}},
                                                         {"bias_axes", "de"},
                                                         {"activation", "tanh"}}),
                                   layer("EinsumDense", {{"equation", "abcd,cde->abe"},
                                                         {"output_shape", {nullptr, 6}},
                                                         {"bias_axes", "e"}}),
                                   layer("EinsumDense", {{"equation", "aXc,cD->aDX"},
                                                         {"output_shape", {3, 4}},
                                                         {"bias_axes", "X"}}),
                                   layer("EinsumDense", {{"equation", "...b,bc->...c"},
                                                         {"output_shape", {2}},
                                                         {"activation", "softmax"}})}),
               {{{4, 5}}},
               false});
  // Volumes (Conv3D, the 3-D pooling, global pooling over a volume's cells). OpenCV 4.6 refuses
  // a global pooling of 5-D tensors (its pads check counts 2 axes): NumPy runs those.
  c.push_back(
      {"volume_conv_pools_dense",
       sequential({5, 6, 7, 2},
                  {layer("Conv3D", {{"filters", 3},
                                    {"kernel_size", {2, 3, 3}},
                                    {"strides", {1, 2, 1}},
                                    {"padding", "same"},
                                    {"activation", "relu"}}),
                   layer("MaxPooling3D", {{"pool_size", {2, 2, 2}}, {"padding", "same"}}),
                   layer("AveragePooling3D",
                         {{"pool_size", {1, 2, 2}}, {"strides", {1, 1, 2}}, {"padding", "same"}}),
                   layer("Flatten"), layer("Dense", {{"units", 4}})}),
       {{{5, 6, 7, 2}}}});
  c.push_back(
      {"volume_pad_crop_upsample",
       sequential({3, 4, 2, 3}, {layer("ZeroPadding3D", {{"padding", {{1, 0}, {0, 2}, {2, 1}}}}),
                                 layer("UpSampling3D", {{"size", {2, 1, 3}}}),
                                 layer("Cropping3D", {{"cropping", {{1, 2}, {0, 1}, {2, 0}}}})}),
       {{{3, 4, 2, 3}}}});
  c.push_back(
      {"volume_conv_transpose",
       sequential({3, 4, 3, 2}, {layer("Conv3DTranspose", {{"filters", 3},
                                                           {"kernel_size", {2, 3, 3}},
                                                           {"strides", {1, 2, 2}},
                                                           {"padding", "same"}}),
                                 layer("Conv3DTranspose", {{"filters", 2},
                                                           {"kernel_size", 3},
                                                           {"strides", {2, 3, 2}},
                                                           {"output_padding", {1, 2, 0}}})}),
       {{{3, 4, 3, 2}}},
       false});  // OpenCV 4.6 has no 3-D Deconvolution
  // Convolutional LSTMs, unrolled: every step's h (going backwards), the last one's. OpenCV 4.6
  // fails on the 5-D Transpose between them (its Permute's axis count): NumPy runs both.
  c.push_back({"conv_lstm2d_sequences_conv_lstm1d",
               sequential({3, 5, 4, 2},
                          {layer("ConvLSTM2D", {{"filters", 3}, {"kernel_size", 3},
                                                {"padding", "same"}, {"return_sequences", true},
                                                {"go_backwards", true}}),
                           layer("Reshape", {{"target_shape", {3, 20, 3}}}),
                           layer("ConvLSTM1D", {{"filters", 2}, {"kernel_size", 2},
                                                {"strides", 2}})}),
               {{{3, 5, 4, 2}}},
               false});
  c.push_back({"conv_lstm3d",
               sequential({2, 3, 4, 3, 2},
                          {layer("ConvLSTM3D", {{"filters", 2}, {"kernel_size", 2},
                                                {"padding", "same"}, {"return_sequences", true}}),
                           layer("Flatten"), layer("Dense", {{"units", 3}})}),
               {{{2, 3, 4, 3, 2}}},
               false});
  c.push_back({"volume_conv_groups_global_max",
               sequential({4, 5, 6, 4}, {layer("Conv3D", {{"filters", 4},
                                                          {"kernel_size", 2},
                                                          {"groups", 2},
                                                          {"dilation_rate", {1, 2, 2}}}),
                                         layer("GlobalMaxPooling3D", {{"keepdims", true}})}),
               {{{4, 5, 6, 4}}},
               false});
  c.push_back({"volume_average_global_average",
               sequential({4, 5, 6, 3}, {layer("AveragePooling3D",
                                               {{"pool_size", {2, 3, 2}}, {"strides", {2, 2, 2}}}),
                                         layer("GlobalAveragePooling3D")}),
               {{{4, 5, 6, 3}}},
               false});
  c.push_back({"depthwise_separable",
               sequential(image, {layer("DepthwiseConv2D", {{"kernel_size", {3, 3}},
                                                            {"depth_multiplier", 2},
                                                            {"padding", "same"}}),
                                  layer("SeparableConv2D", {{"filters", 4}, {"kernel_size", {3, 3}},
                                                            {"depth_multiplier", 2},
                                                            {"activation", "tanh"}})}),
               {{image}}});
  for (const char* padding : {"same", "valid"})
    c.push_back({std::string("conv_transpose_") + padding,
                 sequential({4, 5, 2}, {layer("Conv2DTranspose", {{"filters", 3},
                                                                  {"kernel_size", {3, 2}},
                                                                  {"strides", {2, 2}},
                                                                  {"padding", padding}})}),
                 {{{4, 5, 2}}}});
  c.push_back({"conv_transpose_output_padding",
               sequential({4, 5, 2}, {layer("Conv2DTranspose", {{"filters", 3},
                                                                {"kernel_size", {3, 3}},
                                                                {"strides", {2, 3}},
                                                                {"output_padding", {1, 2}}})}),
               {{{4, 5, 2}}}});
  // OpenCV 4.6 runs a dilated ConvTranspose without an error and wrong (1.38 relative here):
  // NumPy runs it.
  c.push_back({"conv_transpose_dilated",
               sequential({4, 5, 2}, {layer("Conv2DTranspose", {{"filters", 3},
                                                                {"kernel_size", {3, 3}},
                                                                {"dilation_rate", {2, 2}},
                                                                {"padding", "same"}})}),
               {{{4, 5, 2}}},
               false});
  c.push_back({"pad_crop_upsample",
               sequential(image, {layer("ZeroPadding2D", {{"padding", {{1, 2}, {0, 1}}}}),
                                  layer("Conv2D", {{"filters", 2}, {"kernel_size", {1, 1}}}),
                                  layer("Cropping2D", {{"cropping", {{1, 0}, {0, 1}}}}),
                                  layer("UpSampling2D", {{"size", {2, 3}}})}),
               {{image}}});
  c.push_back({"random_crop_resizes_its_centred_window",
               sequential({9, 7, 2}, {layer("RandomCrop", {{"height", 4}, {"width", 3}}),
                                      layer("Conv2D", {{"filters", 2}, {"kernel_size", {1, 1}}})}),
               {{{9, 7, 2}}}});
  c.push_back({"center_crops",
               sequential({7, 6, 2}, {layer("CenterCrop", {{"height", 4}, {"width", 5}}),
                                      layer("CenterCrop", {{"height", 6}, {"width", 3}}),
                                      layer("Conv2D", {{"filters", 2}, {"kernel_size", {1, 1}}})}),
               {{{7, 6, 2}}}});
  // pad_to_aspect_ratio (Pad with the fill value, then Resize) by NumPy from the specification:
  // OpenCV 4.6 computes a Resize of a Pad's output otherwise (0.31 off with a zero fill, where
  // NumPy agrees with Tandem within the bound).
  c.push_back({"resizing_padded_with_a_fill_value",
               sequential({3, 5, 2}, {layer("Resizing", {{"height", 6},
                                                         {"width", 4},
                                                         {"pad_to_aspect_ratio", true},
                                                         {"fill_value", 0.75}}),
                                      layer("Flatten")}),
               {{{3, 5, 2}}},
               false});
  c.push_back({"resizing_bilinear_up",
               sequential({5, 4, 2}, {layer("Resizing", {{"height", 8}, {"width", 7}}),
                                      layer("Conv2D", {{"filters", 2}, {"kernel_size", {1, 1}}})}),
               {{{5, 4, 2}}}});
  // Nearest (half-pixel, rounding up) by NumPy from the specification: OpenCV 4.6 rounds it
  // otherwise.
  c.push_back({"resizing_bilinear_then_nearest_cropped",
               sequential({5, 4, 2}, {layer("Resizing", {{"height", 8}, {"width", 7}}),
                                      layer("Resizing", {{"height", 3},
                                                         {"width", 4},
                                                         {"interpolation", "nearest"},
                                                         {"crop_to_aspect_ratio", true}})}),
               {{{5, 4, 2}}},
               false});
  c.push_back({"inference_identities_rescale_normalize",
               sequential(image, {layer("Rescaling", {{"scale", 0.5}, {"offset", -0.25}}),
                                  layer("Normalization", {{"mean", {0.1, -0.2, 0.3}},
                                                          {"variance", {1.5, 0.25, 4.0}}}),
                                  layer("RandomFlip", {{"seed", 3}}),
                                  layer("RandomTranslation", {{"height_factor", 0.2}, {"width_factor", 0.2}}),
                                  layer("RandomRotation", {{"factor", 0.1}}),
                                  layer("RandomZoom", {{"height_factor", 0.2}}),
                                  layer("RandomContrast", {{"factor", 0.2}}),
                                  layer("RandomBrightness", {{"factor", 0.2}}),
                                  layer("GaussianNoise", {{"stddev", 0.5}}),
                                  layer("SpatialDropout2D", {{"rate", 0.5}}),
                                  layer("Conv2D", {{"filters", 2}, {"kernel_size", {1, 1}}}),
                                  layer("GaussianDropout", {{"rate", 0.3}}),
                                  layer("AlphaDropout", {{"rate", 0.2}}),
                                  layer("Dropout", {{"rate", 0.5}}),
                                  layer("Reshape", {{"target_shape", {12, 6}}}),
                                  layer("Flatten")}),
               {{image}}});
  for (const char* act : {"relu", "tanh", "sigmoid", "softmax", "gelu", "elu", "selu", "softplus",
                          "softsign", "swish", "exponential", "leaky_relu", "hard_sigmoid",
                          "hard_swish", "mish", "log_softmax"})
    c.push_back({std::string("dense_") + act,
                 sequential({7}, {layer("Dense", {{"units", 5}, {"activation", act}})}), {{{7}}}});
  // A Keras 2 model's hard_sigmoid is Keras 2's, clip(0.2 x + 0.5, 0, 1), in ONNX too.
  json keras2 = sequential({7}, {layer("Dense", {{"units", 5}, {"activation", "hard_sigmoid"}})});
  keras2["keras_version"] = "2.15.0";
  c.push_back({"dense_hard_sigmoid_keras2", keras2, {{{7}}}});
  c.push_back({"dense_batch_norm_prelu_softmax",
               sequential({7}, {layer("Dense", {{"units", 6}}), layer("BatchNormalization"),
                                layer("PReLU"), layer("Softmax")}),
               {{{7}}}});
  c.push_back({"relu_family",
               sequential({7}, {layer("ReLU", {{"negative_slope", 0.1}}),
                                layer("LeakyReLU", {{"negative_slope", 0.2}}),
                                layer("ELU", {{"alpha", 0.5}}),
                                layer("Activation", {{"activation", "swish"}})}),
               {{{7}}}});
  c.push_back({"relu_capped_threshold",
               sequential({7}, {layer("ReLU", {{"max_value", 0.3}, {"threshold", 0.1},
                                               {"negative_slope", 0.2}})}),
               {{{7}}}, false});
  c.push_back({"volume_spatial_dropout",
               sequential({2, 3, 2, 2}, {layer("SpatialDropout3D", {{"rate", 0.5}}), layer("Flatten")}),
               {{{2, 3, 2, 2}}}});
  c.push_back({"conv1d_causal_pools",
               sequential({9, 3}, {layer("Conv1D", {{"filters", 4}, {"kernel_size", 3},
                                                    {"dilation_rate", 2}, {"padding", "causal"}}),
                                   layer("MaxPooling1D", {{"pool_size", 2}}),
                                   layer("AveragePooling1D", {{"pool_size", 2}, {"padding", "same"}}),
                                   layer("GlobalMaxPooling1D")}),
               {{{9, 3}}}});
  c.push_back({"depthwise_and_separable_conv1d",
               sequential({10, 3}, {layer("DepthwiseConv1D", {{"kernel_size", 3},
                                                              {"depth_multiplier", 2},
                                                              {"padding", "causal"},
                                                              {"activation", "relu"}}),
                                    layer("SeparableConv1D", {{"filters", 4},
                                                              {"kernel_size", 2},
                                                              {"strides", 2},
                                                              {"padding", "same"},
                                                              {"activation", "tanh"}})}),
               {{{10, 3}}}});
  c.push_back({"conv1d_same_stride_global_average",
               sequential({8, 2}, {layer("Conv1D", {{"filters", 3}, {"kernel_size", 3},
                                                    {"strides", 2}, {"padding", "same"}}),
                                   layer("GlobalAveragePooling1D", {{"keepdims", true}})}),
               {{{8, 2}}}});
  c.push_back(
      {"unit_normalization_identity",
       sequential({4, 3, 2},
                  {layer("UnitNormalization", {{"axis", {1, 3}}}), layer("Identity"),
                   layer("ActivityRegularization", {{"l2", 0.1}}), layer("UnitNormalization")}),
       {{{4, 3, 2}}},
       false});
  c.push_back({"sequence_dense_layer_norm",
               sequential({4, 5}, {layer("Dense", {{"units", 6}, {"activation", "gelu"}}),
                                   layer("LayerNormalization"),
                                   layer("SpatialDropout1D", {{"rate", 0.5}})}),
               {{{4, 5}}}, false});
  c.push_back({"vector_layer_norm",
               sequential({6}, {layer("LayerNormalization", {{"epsilon", 0.01}}),
                                layer("Activation", {{"activation", "relu"}})}),
               {{{6}}},
               false});
  // SpectralNormalization: the wrapped layers on their weights as they stand.
  c.push_back(
      {"spectral_normalization",
       sequential(
           {5, 4, 2},
           {layer("SpectralNormalization",
                  {{"layer",
                    {{"class_name", "Conv2D"}, {"config", {{"filters", 3}, {"kernel_size", 2}}}}}}),
            layer("Flatten"),
            layer("SpectralNormalization",
                  {{"layer", {{"class_name", "Dense"}, {"config", {{"units", 4}}}}},
                   {"power_iterations", 2}})}),
       {{{5, 4, 2}}}});
  // Keras 3's adaptive poolings: overlapping windows over steps, images and a volume.
  c.push_back({"adaptive_pooling_1d",
               sequential({7, 3}, {layer("AdaptiveMaxPooling1D", {{"output_size", 4}}),
                                   layer("AdaptiveAveragePooling1D", {{"output_size", 3}})}),
               {{{7, 3}}},
               false});
  c.push_back({"adaptive_pooling_2d",
               sequential({7, 5, 2}, {layer("AdaptiveAveragePooling2D", {{"output_size", {3, 4}}}),
                                      layer("AdaptiveMaxPooling2D", {{"output_size", 2}})}),
               {{{7, 5, 2}}},
               false});
  c.push_back(
      {"adaptive_pooling_3d",
       sequential({3, 5, 4, 2}, {layer("AdaptiveMaxPooling3D", {{"output_size", {2, 3, 3}}}),
                                 layer("AdaptiveAveragePooling3D", {{"output_size", {1, 2, 2}}})}),
       {{{3, 5, 4, 2}}},
       false});
  // Keras 3's two root-mean-square forms: LayerNormalization's rms_scaling (the mean left in)
  // and RMSNormalization.
  c.push_back({"rms_normalizations",
               sequential({4, 6}, {layer("LayerNormalization", {{"rms_scaling", true}}),
                                   layer("Dense", {{"units", 5}}),
                                   layer("RMSNormalization", {{"epsilon", 0.01}})}),
               {{{4, 6}}},
               false});
  // Numbers into categories: ONNX's comparisons, which OpenCV does not run; NumPy does.
  const json bins = {-0.5, 0.0, 0.0, 0.5};
  c.push_back({"discretization_bins",
               sequential({5}, {layer("Discretization", {{"bin_boundaries", bins}})}),
               {{{5}}},
               false});
  c.push_back({"discretization_count",
               sequential({5}, {layer("Discretization",
                                      {{"bin_boundaries", bins}, {"output_mode", "count"}})}),
               {{{5}}},
               false});
  c.push_back({"discretization_one_hot",
               sequential({5, 1}, {layer("Discretization",
                                         {{"bin_boundaries", bins}, {"output_mode", "one_hot"}})}),
               {{{5, 1}}},
               false});
  c.push_back({"discretization_without_boundaries",
               sequential({4}, {layer("Discretization", {{"bin_boundaries", json::array()}})}),
               {{{4}}},
               false});
  c.push_back({"category_encoding_multi_hot",
               sequential({3}, {layer("CategoryEncoding", {{"num_tokens", 6}})}),
               {{{3}, 6}},
               false});
  c.push_back({"category_encoding_count_of_a_grid",
               sequential({3, 2}, {layer("CategoryEncoding",
                                         {{"num_tokens", 4}, {"output_mode", "count"}})}),
               {{{3, 2}, 4}},
               false});
  c.push_back({"category_encoding_one_hot",
               sequential({4}, {layer("CategoryEncoding",
                                      {{"num_tokens", 5}, {"output_mode", "one_hot"}})}),
               {{{4}, 5}},
               false});
  // IntegerLookup's table as comparisons (NumPy runs them): values in [0, 9), of which 0, 2, 5,
  // 6 and 8 are outside the vocabulary.
  const json vocabulary = {3, 1, 7, 4};
  c.push_back({"integer_lookup_two_oov_indices",
               sequential({4}, {layer("IntegerLookup",
                                      {{"vocabulary", vocabulary}, {"num_oov_indices", 2}})}),
               {{{4}, 9}},
               false});
  c.push_back(
      {"integer_lookup_masked_inverse",
       sequential({4}, {layer("IntegerLookup",
                              {{"vocabulary", vocabulary}, {"mask_token", 0}, {"invert", true}})}),
       {{{4}, 9}},
       false});
  c.push_back({"integer_lookup_masked_count",
               sequential({3, 2}, {layer("IntegerLookup", {{"vocabulary", vocabulary},
                                                           {"mask_token", 0},
                                                           {"output_mode", "count"}})}),
               {{{3, 2}, 9}},
               false});
  c.push_back({"integer_lookup_tf_idf",
               sequential({5}, {layer("IntegerLookup", {{"vocabulary", vocabulary},
                                                        {"output_mode", "tf_idf"},
                                                        {"idf_weights", {0.5, 1.5, 0.25, 2.0}},
                                                        {"max_tokens", 8},
                                                        {"pad_to_max_tokens", true}})}),
               {{{5}, 9}},
               false});
  // Recurrent layers: ONNX's LSTM, GRU and RNN operators, run by NumPy from the specification
  // (OpenCV 4.6 runs none of these graphs: no RNN, a GRU only with all six inputs, an LSTM
  // whose Y it gives another rank, no Gather of several indices).
  c.push_back({"lstm_sequences_then_last_step",
               sequential({6, 3}, {layer("LSTM", {{"units", 4}, {"return_sequences", true}}),
                                   layer("LSTM", {{"units", 5}}), layer("Dense", {{"units", 2}})}),
               {{{6, 3}}},
               false});
  c.push_back(
      {"conv1d_then_conv1d_transpose",
       sequential(
           {8, 2},
           {layer("Conv1D", {{"filters", 4},
                             {"kernel_size", 3},
                             {"strides", 2},
                             {"padding", "same"},
                             {"activation", "relu"}}),
            layer("Conv1DTranspose",
                  {{"filters", 3}, {"kernel_size", 3}, {"strides", 2}, {"padding", "same"}}),
            layer("Conv1DTranspose",
                  {{"filters", 1}, {"kernel_size", 2}, {"strides", 3}, {"output_padding", 1}})}),
       {{{8, 2}}}});
  // Keras' RNN over a cell: the cell's layer's operator; over StackedRNNCells, each cell's in
  // turn.
  c.push_back(
      {"rnn_over_cells",
       sequential(
           {5, 3},
           {layer("RNN", {{"return_sequences", true},
                          {"cell",
                           {{"class_name", "LSTMCell"},
                            {"config", {{"name", "lstm_cell_2"}, {"units", 4}}}}}}),
            layer("RNN", {{"go_backwards", true},
                          {"return_sequences", true},
                          {"cell", {{"class_name", "GRUCell"}, {"config", {{"units", 3}}}}}}),
            layer("Bidirectional",
                  {{"layer",
                    {{"class_name", "RNN"},
                     {"config",
                      {{"return_sequences", true},
                       {"cell", {{"class_name", "LSTMCell"}, {"config", {{"units", 2}}}}}}}}}}),
            layer("RNN", {{"go_backwards", true},
                          {"cell",
                           {{"class_name", "StackedRNNCells"},
                            {"config",
                             {{"cells",
                               {{{"class_name", "SimpleRNNCell"},
                                 {"config", {{"name", "simple_rnn_cell"}, {"units", 2}}}},
                                {{"class_name", "LSTMCell"},
                                 {"config", {{"name", "lstm_cell"}, {"units", 3}}}}}}}}}}})}),
       {{{5, 3}}},
       false});
  c.push_back({"simple_rnn_last_step",
               sequential({5, 2}, {layer("SimpleRNN", {{"units", 3}})}),
               {{{5, 2}}},
               false});
  c.push_back({"lstm_sequences_gru_backwards",
               sequential({6, 3}, {layer("LSTM", {{"units", 4}, {"return_sequences", true}}),
                                   layer("GRU", {{"units", 5}, {"go_backwards", true}})}),
               {{{6, 3}}},
               false});
  c.push_back({"gru_sequences_rnn_relu",
               sequential({5, 2}, {layer("GRU", {{"units", 3},
                                                 {"return_sequences", true},
                                                 {"recurrent_activation", "softsign"}}),
                                   layer("SimpleRNN", {{"units", 4},
                                                       {"activation", "relu"},
                                                       {"use_bias", false},
                                                       {"return_sequences", true}})}),
               {{{5, 2}}},
               false});
  c.push_back(
      {"bidirectional_lstm_concat_then_gru_sum",
       sequential(
           {5, 3},
           {layer("Bidirectional",
                  {{"layer",
                    {{"class_name", "LSTM"},
                     {"config", {{"name", "lstm"}, {"units", 3}, {"return_sequences", true}}}}}}),
            layer("Bidirectional",
                  {{"layer", {{"class_name", "GRU"}, {"config", {{"name", "gru"}, {"units", 2}}}}},
                   {"merge_mode", "sum"}})}),
       {{{5, 3}}},
       false});
  c.push_back(
      {"bidirectional_rnn_ave_and_mul",
       sequential(
           {4, 2},
           {layer("Bidirectional",
                  {{"layer",
                    {{"class_name", "SimpleRNN"},
                     {"config", {{"name", "rnn"}, {"units", 3}, {"return_sequences", true}}}}},
                   {"merge_mode", "ave"}}),
            layer("Bidirectional",
                  {{"layer",
                    {{"class_name", "SimpleRNN"},
                     {"config", {{"name", "rnn_1"}, {"units", 2}, {"return_sequences", true}}}}},
                   {"merge_mode", "mul"}}),
            layer(
                "Bidirectional",
                {{"layer", {{"class_name", "LSTM"}, {"config", {{"name", "lstm"}, {"units", 2}}}}},
                 {"merge_mode", "mul"}})}),
       {{{4, 2}}},
       false});
  c.push_back(
      {"gru_reset_before_sequences_then_backwards",
       sequential({5, 3},
                  {layer("GRU", {{"units", 4}, {"reset_after", false}, {"return_sequences", true}}),
                   layer("GRU", {{"units", 2},
                                 {"reset_after", false},
                                 {"use_bias", false},
                                 {"go_backwards", true}})}),
       {{{5, 3}}},
       false});
  c.push_back(
      {"time_distributed_dense",
       sequential({4, 3},
                  {layer("TimeDistributed",
                         {{"layer",
                           {{"class_name", "Dense"},
                            {"config", {{"name", "dense"}, {"units", 5}, {"activation", "relu"}}}}}}),
                   layer("TimeDistributed",
                         {{"layer",
                           {{"class_name", "Dense"},
                            {"config", {{"name", "dense_1"}, {"units", 2}}}}}})}),
       {{{4, 3}}},
       false});
  c.push_back({"time_distributed_conv",
               sequential({3, 4, 4, 2},
                          {layer("TimeDistributed",
                                 {{"layer",
                                   {{"class_name", "Conv2D"},
                                    {"config",
                                     {{"name", "conv"},
                                      {"filters", 3},
                                      {"kernel_size", 3},
                                      {"padding", "same"},
                                      {"activation", "relu"}}}}}}),
                           layer("TimeDistributed",
                                 {{"layer", {{"class_name", "Flatten"}, {"config", {{"name", "flat"}}}}}}),
                           layer("TimeDistributed",
                                 {{"layer",
                                   {{"class_name", "Dense"},
                                    {"config", {{"name", "out"}, {"units", 2}}}}}})}),
               {{{3, 4, 4, 2}}},
               true});
  c.push_back(
      {"group_normalization",
       sequential({4, 3, 6},
                  {layer("GroupNormalization", {{"groups", 3}}), layer("Dense", {{"units", 4}}),
                   layer("GroupNormalization", {{"groups", -1}, {"scale", false}})}),
       {{{4, 3, 6}}},
       false});
  c.push_back(
      {"sequence_shapes",
       sequential({6, 3}, {layer("ZeroPadding1D", {{"padding", {1, 2}}}),
                           layer("Cropping1D", {{"cropping", {2, 0}}}),
                           layer("UpSampling1D", {{"size", 2}}),
                           layer("Permute", {{"dims", {2, 1}}}), layer("Flatten"),
                           layer("Dense", {{"units", 3}}), layer("RepeatVector", {{"n", 2}})}),
       {{{6, 3}}},
       false});
  // Tokens 0 and 1 in two features: a quarter of the steps are all 1, which Masking zeroes.
  c.push_back({"masking_then_flatten",
               sequential({5, 2}, {layer("Masking", {{"mask_value", 1.0}}), layer("Flatten"),
                                   layer("Dense", {{"units", 3}})}),
               {{{5, 2}, 2}},
               false});
  c.push_back({"lstm_backwards_own_activations",
               sequential({4, 3}, {layer("LSTM", {{"units", 2},
                                                  {"activation", "softsign"},
                                                  {"recurrent_activation", "sigmoid"},
                                                  {"go_backwards", true},
                                                  {"return_sequences", true}})}),
               {{{4, 3}}},
               false});
  c.push_back({"embedding_position",
               functional({input_layer("ids", {5}),
                           call("Embedding", "emb", {{"input_dim", 11}, {"output_dim", 4}}, {"ids"}),
                           call("PositionEmbedding", "pos", {{"sequence_length", 8}}, {"emb"}),
                           call("Add", "sum", json::object(), {"emb", "pos"})},
                          {"ids"}, {"sum"}),
               {{{5}, 11}}, false});
  c.push_back(
      {"dot_attention_scaled_causal_with_key",
       functional({input_layer("q", {4, 3}), input_layer("v", {5, 2}), input_layer("k", {5, 3}),
                   call("Attention", "attention", {{"use_scale", true}}, {"q", "v", "k"},
                        {{"use_causal_mask", true}})},
                  {"q", "v", "k"}, {"attention"}),
       {{{4, 3}}, {{5, 2}}, {{5, 3}}},
       false});
  // Bahdanau-style scores: Attention's concat mode (scaled, causal, with a key) and
  // AdditiveAttention's scale per feature, Tanh of the Unsqueezed sums reduced over the features.
  c.push_back(
      {"concat_attention_scaled_causal_with_key",
       functional({input_layer("q", {4, 3}), input_layer("v", {5, 2}), input_layer("k", {5, 3}),
                   call("Attention", "attention", {{"use_scale", true}, {"score_mode", "concat"}},
                        {"q", "v", "k"}, {{"use_causal_mask", true}})},
                  {"q", "v", "k"}, {"attention"}),
       {{{4, 3}}, {{5, 2}}, {{5, 3}}},
       false});
  c.push_back({"additive_attention",
               functional({input_layer("q", {4, 3}), input_layer("v", {6, 3}),
                           call("AdditiveAttention", "attention", json::object(), {"q", "v"})},
                          {"q", "v"}, {"attention"}),
               {{{4, 3}}, {{6, 3}}},
               false});
  // An encoder's final states starting two decoders (return_state, initial_state in Keras 2's
  // form: the states after the sequence in the call's list), the models' outputs among the
  // layers' later ones: ONNX's initial_h/initial_c and Y_h/Y_c, the parts sliced from the packs.
  {
    const auto ref = [](const char* layer, int tensor) {
      return json{layer, 0, tensor, json::object()};
    };
    json layers = {
        input_layer("enc", {5, 3}),
        input_layer("dec", {4, 2}),
        call("LSTM", "encoder", {{"units", 4}, {"return_state", true}}, {"enc"}),
        call("LSTM", "decoder", {{"units", 4}, {"return_sequences", true}, {"return_state", true}},
             {"dec"}),
        call("GRU", "gru", {{"units", 4}, {"return_state", true}}, {"dec"}),
        call("Dense", "dense", {{"units", 2}}, {"decoder"})};
    layers[3]["inbound_nodes"][0].push_back(ref("encoder", 1));
    layers[3]["inbound_nodes"][0].push_back(ref("encoder", 2));
    layers[4]["inbound_nodes"][0].push_back(ref("encoder", 1));
    json model = functional(layers, {"enc", "dec"}, {"dense"});
    model["config"]["output_layers"] = {
        {"dense", 0, 0}, {"decoder", 0, 2}, {"gru", 0, 1}, {"encoder", 0, 0}};
    c.push_back({"seq2seq_states", model, {{{5, 3}}, {{4, 2}}}, false});
    // A Bidirectional from the encoder's states (each layer from h and c), returning its own.
    json inner = {
        {"class_name", "LSTM"},
        {"config",
         {{"name", "lstm"}, {"units", 4}, {"return_sequences", true}, {"return_state", true}}}};
    json both = {input_layer("enc", {5, 3}),
                 call("LSTM", "encoder", {{"units", 4}, {"return_state", true}}, {"enc"}),
                 call("Bidirectional", "bi", {{"layer", inner}, {"merge_mode", "sum"}}, {"enc"})};
    for (int tensor : {1, 2, 1, 2}) both[2]["inbound_nodes"][0].push_back(ref("encoder", tensor));
    json bidirectional = functional(both, {"enc"}, {"bi"});
    bidirectional["config"]["output_layers"] = {{"bi", 0, 0}, {"bi", 0, 4}, {"bi", 0, 1}};
    c.push_back({"bidirectional_states", bidirectional, {{{5, 3}}}, false});
  }
  // A ConvLSTM2D's final h and c (return_state) as outputs of their own and read by a
  // Conv2D: the packed output, sliced back into its parts.
  {
    json layers = {input_layer("clip", {3, 5, 4, 2}),
                   call("ConvLSTM2D", "encoder",
                        {{"filters", 3},
                         {"kernel_size", 3},
                         {"padding", "same"},
                         {"return_sequences", true},
                         {"return_state", true}},
                        {"clip"}),
                   call("Conv2D", "head", {{"filters", 2}, {"kernel_size", 1}}, {"encoder"})};
    layers[2]["inbound_nodes"][0][0][2] = 2;  // the head reads c
    json model = functional(layers, {"clip"}, {"head"});
    model["config"]["output_layers"] = {{"head", 0, 0}, {"encoder", 0, 1}, {"encoder", 0, 0}};
    c.push_back({"conv_lstm_states", model, {{{3, 5, 4, 2}}}, false});
  }
  // A convolutional encoder's final h and c starting a decoder (initial_state in Keras 2's form).
  {
    const auto ref = [](const char* layer, int tensor) {
      return json{layer, 0, tensor, json::object()};
    };
    json layers = {
        input_layer("past", {3, 4, 5, 2}), input_layer("future", {2, 4, 5, 1}),
        call("ConvLSTM2D", "encoder",
             {{"filters", 3}, {"kernel_size", 3}, {"padding", "same"}, {"return_state", true}},
             {"past"}),
        call("ConvLSTM2D", "decoder",
             {{"filters", 3}, {"kernel_size", 3}, {"padding", "same"}, {"return_sequences", true}},
             {"future"})};
    layers[3]["inbound_nodes"][0].push_back(ref("encoder", 1));
    layers[3]["inbound_nodes"][0].push_back(ref("encoder", 2));
    c.push_back({"conv_lstm_seq2seq",
                 functional(layers, {"past", "future"}, {"decoder"}),
                 {{{3, 4, 5, 2}}, {{2, 4, 5, 1}}},
                 false});
  }
  // TandemReduction (reduce_sum / mean / max / min): ONNX's reductions, then Reshape.
  c.push_back(
      {"reductions",
       functional({input_layer("x", {3, 4, 2}),
                   call("TandemReduction", "sum",
                        {{"reduction", "sum"}, {"axes", {-1}}, {"keepdims", false}}, {"x"}),
                   call("TandemReduction", "mean",
                        {{"reduction", "mean"}, {"axes", {1, 2}}, {"keepdims", true}}, {"x"}),
                   call("TandemReduction", "max",
                        {{"reduction", "max"}, {"axes", {2}}, {"keepdims", false}}, {"x"}),
                   call("TandemReduction", "min",
                        {{"reduction", "min"}, {"axes", {1, 2, 3}}, {"keepdims", false}}, {"x"})},
                  {"x"}, {"sum", "mean", "max", "min"}),
       {{{3, 4, 2}}},
       false});
  // Keras' Softmax over the steps (axis 1), then over the last axis: ONNX's Softmax over each.
  c.push_back({"softmax_over_steps",
               sequential({3, 4}, {layer("Softmax", {{"axis", 1}}), layer("Dense", {{"units", 2}}),
                                   layer("Softmax", {{"axis", -1}})}),
               {{{3, 4}}},
               false});
  // TandemIndexing (x[...], expand_dims, squeeze): Slice (backwards too) and Reshape. NumPy runs
  // it (OpenCV 4.6's Slice takes no negative steps).
  {
    const json all = {{"start", nullptr}, {"stop", nullptr}, {"step", nullptr}};
    const json back = {{"start", -1}, {"stop", nullptr}, {"step", -2}};
    const json middle = {{"start", 1}, {"stop", 3}, {"step", nullptr}};
    c.push_back(
        {"indexing_slices_expand_squeeze",
         functional({input_layer("x", {5, 4}),
                     call("TandemIndexing", "first", {{"index", {all, 0}}}, {"x"}),
                     call("TandemIndexing", "back", {{"index", {all, back, middle}}}, {"x"}),
                     call("TandemIndexing", "e", {{"expand_axes", {1}}}, {"first"}),
                     call("TandemIndexing", "sq", {{"squeeze_axes", {1}}}, {"e"})},
                    {"x"}, {"sq", "back"}),
         {{{5, 4}}},
         false});
  }
  c.push_back({"self_attention_causal",
               functional({input_layer("x", {4, 6}),
                           call("MultiHeadAttention", "mha", {{"num_heads", 2}, {"key_dim", 3}},
                                {"x"}, {{"value", {"x", 0, 0}}, {"use_causal_mask", true}})},
                          {"x"}, {"mha"}),
               {{{4, 6}}}, false});
  // GroupedQueryAttention: 4 query heads over 2 key/value heads, causal; 3 over 1 (multi-query)
  // across a key of its own and an attention_mask.
  c.push_back(
      {"grouped_query_attention_causal",
       functional({input_layer("x", {5, 6}),
                   call("GroupedQueryAttention", "gqa",
                        {{"head_dim", 3}, {"num_query_heads", 4}, {"num_key_value_heads", 2}},
                        {"x"}, {{"value", {"x", 0, 0}}, {"use_causal_mask", true}})},
                  {"x"}, {"gqa"}),
       {{{5, 6}}},
       false});
  c.push_back(
      {"multi_query_attention_mask",
       functional(
           {input_layer("q", {3, 4}), input_layer("v", {5, 4}), input_layer("k", {5, 3}),
            input_layer("m", {3, 5}),
            call("GroupedQueryAttention", "gqa",
                 {{"head_dim", 2}, {"num_query_heads", 3}, {"num_key_value_heads", 1}}, {"q"},
                 {{"value", {"v", 0, 0}}, {"key", {"k", 0, 0}}, {"attention_mask", {"m", 0, 0}}})},
           {"q", "v", "k", "m"}, {"gqa"}),
       {{{3, 4}}, {{5, 4}}, {{5, 3}}, {{3, 5}, 0, true}},
       false});
  // A query that sees no key attends uniformly without dropout, to nothing with it (Keras 3's
  // fused and masked-softmax paths).
  for (const double dropout : {0.0, 0.25})
    c.push_back({dropout > 0 ? "cross_attention_mask_dropout" : "cross_attention_mask",
                 functional({input_layer("q", {3, 4}), input_layer("v", {5, 2}),
                             input_layer("k", {5, 3}), input_layer("m", {3, 5}),
                             call("MultiHeadAttention", "mha",
                                  {{"num_heads", 2},
                                   {"key_dim", 3},
                                   {"value_dim", 2},
                                   {"output_shape", 7},
                                   {"dropout", dropout}},
                                  {"q"},
                                  {{"value", {"v", 0, 0}},
                                   {"key", {"k", 0, 0}},
                                   {"attention_mask", {"m", 0, 0}}})},
                            {"q", "v", "k", "m"}, {"mha"}),
                 {{{3, 4}}, {{5, 2}}, {{5, 3}}, {{3, 5}, 0, true}},
                 false});
  c.push_back({"dot_vectors_and_matrices",
               functional({input_layer("a", {4}), input_layer("b", {4}), input_layer("s", {3, 4}),
                           input_layer("t", {2, 4}),
                           call("Dot", "dv", {{"axes", 1}}, {"a", "b"}),
                           call("Dot", "dm", {{"axes", {2, 2}}}, {"s", "t"}),
                           call("Dot", "dn", {{"axes", {1, 1}}}, {"s", "s"})},
                          {"a", "b", "s", "t"}, {"dv", "dm", "dn"}),
               {{{4}}, {{4}}, {{3, 4}}, {{2, 4}}}, false});
  c.push_back({"dot_cosine",
               functional({input_layer("a", {4}), input_layer("b", {4}), input_layer("s", {3, 4}),
                           input_layer("t", {4, 2}),
                           call("Dot", "cv", {{"axes", 1}, {"normalize", true}}, {"a", "b"}),
                           call("Dot", "cm", {{"axes", {2, 1}}, {"normalize", true}}, {"s", "t"})},
                          {"a", "b", "s", "t"}, {"cv", "cm"}),
               {{{4}}, {{4}}, {{3, 4}}, {{4, 2}}},
               false});
  // Merges of channels-first values (convolution outputs), a shared convolution (called on a
  // and on b: one set of weights) and two outputs.
  json shared = call("Conv2D", "conv", {{"filters", 3}, {"kernel_size", {3, 3}}, {"padding", "same"}},
                     {"a"});
  shared["inbound_nodes"].push_back(json::array({{"b", 0, 0, json::object()}}));
  std::vector<json> merges{input_layer("a", {4, 4, 2}), input_layer("b", {4, 4, 2}), shared,
                           call("Conv2D", "other", {{"filters", 3}, {"kernel_size", {1, 1}}}, {"b"})};
  for (auto [cls, name] : std::vector<std::pair<const char*, const char*>>{
           {"Add", "add"}, {"Multiply", "mul"}, {"Average", "avg"}, {"Maximum", "max"},
           {"Minimum", "min"}, {"Concatenate", "cat"}}) {
    json l = call(cls, name, json::object(), {"conv"});
    l["inbound_nodes"] = json::array({json::array({{"conv", 0, 0, json::object()},
                                                   {"conv", 1, 0, json::object()},
                                                   {"other", 0, 0, json::object()}})});
    merges.push_back(l);
  }
  merges.push_back(call("Subtract", "sub", json::object(), {"add", "mul"}));
  merges.push_back(call("Concatenate", "all", {{"axis", -1}}, {"sub", "avg", "max", "min", "cat"}));
  merges.push_back(call("GlobalAveragePooling2D", "pool", json::object(), {"all"}));
  c.push_back({"merges_shared_two_outputs", functional(merges, {"a", "b"}, {"all", "pool"}),
               {{{4, 4, 2}}, {{4, 4, 2}}}});
  return c;
}

void write_floats(const fs::path& path, const float* data, std::int64_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), n * static_cast<std::int64_t>(sizeof(float)));
}

json shape_with_batch(const Shape& s) {
  json j = json::array({kBatch});
  for (auto d : s) j.push_back(d);
  return j;
}

// Builds, randomizes, runs and exports one case into `dir`; returns its manifest entry.
json prepare(const Case& c, const fs::path& dir, std::mt19937& rng) {
  auto model = Model::from_config(c.model, "model", 7);
  std::uniform_real_distribution<float> u(-1, 1), positive(0.5f, 1.5f);
  for (Parameter* p : model->parameters())
    for (float& v : p->value.values())
      v = p->name.find("variance") != std::string::npos ? positive(rng) : 0.5f * u(rng);
  std::vector<std::vector<float>> inputs;
  std::int64_t row = 0;
  for (const InputSpec& in : c.inputs) {
    std::vector<float> values(static_cast<std::size_t>(kBatch * shape_size(in.shape)));
    for (float& v : values) {
      if (in.ids > 0) v = static_cast<float>(rng() % static_cast<std::uint32_t>(in.ids));
      else if (in.mask) v = rng() % 3 == 0 ? 0.0f : 1.0f;
      else v = u(rng);
    }
    row += shape_size(in.shape);
    inputs.push_back(std::move(values));
  }
  if (c.label.starts_with("cross_attention_mask"))  // one query that sees no key at all
    for (std::int64_t k = 0; k < 5; ++k) inputs[3][static_cast<std::size_t>(5 + k)] = 0;
  Tensor x(c.inputs.size() == 1 ? [&] { Shape s{kBatch}; s.insert(s.end(), c.inputs[0].shape.begin(), c.inputs[0].shape.end()); return s; }()
                                : Shape{kBatch, row});
  std::int64_t at = 0;
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::int64_t n = shape_size(c.inputs[i].shape);
      std::copy_n(inputs[i].begin() + b * n, n, x.data() + at);
      at += n;
    }
  const std::vector<const Tensor*>& outputs = model->forward_outputs(x, false);
  json entry{{"label", c.label}, {"onnx", (dir / (c.label + ".onnx")).string()},
             {"opencv", c.opencv}, {"inputs", json::array()}, {"outputs", json::array()}};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const fs::path f = dir / (c.label + ".in" + std::to_string(i));
    write_floats(f, inputs[i].data(), static_cast<std::int64_t>(inputs[i].size()));
    const std::string name = model->input_name(i).empty() ? "input" : model->input_name(i);
    entry["inputs"].push_back({{"name", name}, {"file", f.string()},
                               {"shape", shape_with_batch(c.inputs[i].shape)}});
  }
  double largest = 1;
  for (const Tensor* out : outputs)
    for (float v : out->values()) largest = std::max(largest, static_cast<double>(std::fabs(v)));
  entry["scale"] = largest;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const fs::path f = dir / (c.label + ".out" + std::to_string(j));
    write_floats(f, outputs[j]->data(), outputs[j]->size());
    entry["outputs"].push_back({{"file", f.string()},
                                {"shape", shape_with_batch(model->output_shape(j))}});
  }
  test::write_text(dir / (c.label + ".onnx"), onnx_export::export_onnx(*model, {}).bytes);
  return entry;
}

TEST(OnnxExportOracle, EveryLayerClassIsExportable) {
  const std::vector<std::string> known = onnx_export::exportable_classes();
  const std::set<std::string> exportable(known.begin(), known.end());
  for (const auto& [cls, made] : nn::layer_registry())
    EXPECT_TRUE(exportable.count(cls)) << cls << " has no ONNX exporter";
  // ... and every class is in some case below.
  std::set<std::string> covered;
  for (const Case& c : cases())
    for (const auto& l : c.model["config"]["layers"]) covered.insert(l["class_name"].get<std::string>());
  for (const auto& [cls, made] : nn::layer_registry())
    EXPECT_TRUE(covered.count(cls)) << cls << " is in no export case";
}

TEST(OnnxExportOracle, CheckedByOnnxAndRunByOpenCvOrNumPyAsTandemComputes) {
  // Debian's python3-onnx and python3-opencv (scripts/setup installs them).
  const auto present = test::run_command(std::string(test::system_python()) + " -c 'import onnx, cv2'");
  if (present.exit_code != 0) GTEST_SKIP() << "python3-onnx or python3-opencv missing: " << present.err;
  const fs::path dir = test::scratch_dir("onnx-export-oracle");
  std::mt19937 rng(20261126);
  json manifest = json::array();
  for (const Case& c : cases()) manifest.push_back(prepare(c, dir, rng));
  // The negative controls: the first OpenCV case and an attention case (run by NumPy) again,
  // expecting their outputs plus 1e-3.
  for (const std::string& label :
       {std::string("negative_control"), std::string("negative_control_numpy")}) {
    json control = label == "negative_control" ? manifest[0] : json();
    for (const json& entry : manifest)
      if (label != "negative_control" && entry["label"] == "cross_attention_mask") control = entry;
    ASSERT_EQ(control["opencv"].get<bool>(), label == "negative_control");
    control["label"] = label;
    for (auto& out : control["outputs"]) {
      const std::string bytes = test::read_text(out["file"].get<std::string>());
      std::vector<float> values(bytes.size() / sizeof(float));
      std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
      for (float& f : values) f += 1e-3f;
      const std::string moved = out["file"].get<std::string>() + ".moved";
      write_floats(moved, values.data(), static_cast<std::int64_t>(values.size()));
      out["file"] = moved;
    }
    manifest.push_back(control);
  }
  test::write_text(dir / "manifest.json", manifest.dump());
  const auto r = test::run_command(std::string(test::system_python()) + " " +
                                   (test::source_dir() / "tests/oracle/onnx_runtime_check.py").string() +
                                   " " + (dir / "manifest.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json results = json::parse(r.out);
  // The shared convolution (two calls) is stored once, and both calls read it.
  int shared_kernels = 0;
  for (const auto& name : results.at("merges_shared_two_outputs")["initializers"])
    shared_kernels += name.get<std::string>().rfind("conv/kernel", 0) == 0;
  EXPECT_EQ(shared_kernels, 1);
  for (const json& entry : manifest) {
    const std::string label = entry["label"];
    const json& got = results.at(label);
    EXPECT_EQ(got["checker"], "ok") << label;
    // OpenCV runs what it can; NumPy the rest.
    const json& run = got[entry["opencv"].get<bool>() ? "opencv" : "numpy"];
    if (!run.is_number()) {
      ADD_FAILURE() << label << ": " << run;
      continue;
    }
    const double diff = run.get<double>();
    if (label.starts_with("negative_control")) {
      EXPECT_GT(diff, 5e-4) << "the comparison did not see a perturbed output";
    } else {
      EXPECT_LE(diff, kBar * entry["scale"].get<double>()) << label;
    }
  }
}

}  // namespace
}  // namespace tandem
