// The CUDA replica against the CPU backend, through the public ReplicaModel (label "gpu"): every
// layer, loss, metric and optimizer on `cuda:0` computes what the CPU computes on the same data
// and weights; a short training run follows the CPU's trajectory (the meta-equivalence test of
// docs/design.md contract 1 on a GPU); the template mirrors the device (contract 2). Skipped
// when no CUDA device is usable (CI); run on a GPU machine by scripts/gpu-check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "backend/ops.hpp"
#include "gpu/gpu_test_support.hpp"
#include "gpu/replica_test_support.hpp"
#include "keras_config_builders.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/devices.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace {

using nlohmann::json;

using gpu_test::layer;
using gpu_test::plan;
using gpu_test::sequential;
using namespace replica_test;

struct LayerCase {
  std::string name;
  Shape input;
  json layers;  // followed by Flatten and Dense(3)
  std::int64_t vocabulary = 0;
  json model = nullptr;  // else a whole functional model of `input` with an output of 3 units
};

// A functional model of input (4, 3): an encoder LSTM's final states (return_state) start a
// decoder LSTM (initial_state), whose h starts a GRU; Keras' Attention (dot and concat scores) and
// AdditiveAttention between the decoder's sequence and the input; the decoder's c, the GRU's
// output and the attentions' flattened into Dense(3).
json recurrent_states_model() {
  using test::keras2_layer;
  using test::keras2_ref;
  return {
      {"class_name", "Functional"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"},
           {"name", "x"},
           {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 4, 3}}}},
           {"inbound_nodes", json::array()}},
          keras2_layer("LSTM", "encoder", {{"units", 3}, {"return_state", true}},
                       {keras2_ref("x", 0)}),
          keras2_layer("LSTM", "decoder",
                       {{"units", 3}, {"return_sequences", true}, {"return_state", true}},
                       {keras2_ref("x", 0), keras2_ref("encoder", 1), keras2_ref("encoder", 2)}),
          keras2_layer("GRU", "gru", {{"units", 3}},
                       {keras2_ref("x", 0), keras2_ref("decoder", 1)}),
          keras2_layer("Attention", "attention", {{"use_scale", true}},
                       {keras2_ref("decoder", 0), keras2_ref("x", 0)}),
          keras2_layer("AdditiveAttention", "additive", json::object(),
                       {keras2_ref("decoder", 0), keras2_ref("x", 0)}),
          keras2_layer("Attention", "concat", {{"use_scale", true}, {"score_mode", "concat"}},
                       {keras2_ref("x", 0), keras2_ref("decoder", 0)}),
          keras2_layer(
              "Concatenate", "attended", json::object(),
              {keras2_ref("attention", 0), keras2_ref("additive", 0), keras2_ref("concat", 0)}),
          keras2_layer("Flatten", "flat", json::object(), {keras2_ref("attended", 0)}),
          keras2_layer("Concatenate", "join", json::object(),
                       {keras2_ref("flat", 0), keras2_ref("gru", 0), keras2_ref("decoder", 2)}),
          keras2_layer("Dense", "out", {{"units", 3}}, {keras2_ref("join", 0)})}},
        {"input_layers", {{"x", 0, 0}}},
        {"output_layers", {{"out", 0, 0}}}}}};
}

// A functional model of input (4, 6): MultiHeadAttention and GroupedQueryAttention (4 query
// heads over 2 key/value heads) over the input, joined, flattened into Dense(3).
// A functional model of input (3, 6, 2): an encoder ConvLSTM1D's final h and c starting a
// decoder's (initial_state), the decoder's sequence flattened into Dense(3).
json conv_lstm_states_model() {
  using test::keras2_layer;
  using test::keras2_ref;
  return {
      {"class_name", "Functional"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"},
           {"name", "x"},
           {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 3, 6, 2}}}},
           {"inbound_nodes", json::array()}},
          keras2_layer(
              "ConvLSTM1D", "encoder",
              {{"filters", 2}, {"kernel_size", 2}, {"padding", "same"}, {"return_state", true}},
              {keras2_ref("x", 0)}),
          keras2_layer(
              "ConvLSTM1D", "decoder",
              {{"filters", 2}, {"kernel_size", 3}, {"padding", "same"}, {"return_sequences", true}},
              {keras2_ref("x", 0), keras2_ref("encoder", 1), keras2_ref("encoder", 2)}),
          keras2_layer("Flatten", "flat", json::object(), {keras2_ref("decoder", 0)}),
          keras2_layer("Dense", "out", {{"units", 3}}, {keras2_ref("flat", 0)})}},
        {"input_layers", {{"x", 0, 0}}},
        {"output_layers", {{"out", 0, 0}}}}}};
}

json attention_heads_model() {
  using test::keras2_layer;
  using test::keras2_ref;
  // Keras 2's call attention(x, value=x).
  const json self = json::array({"x", 0, 0, {{"value", json::array({"x", 0, 0})}}});
  return {{"class_name", "Functional"},
          {"config",
           {{"layers",
             {{{"class_name", "InputLayer"},
               {"name", "x"},
               {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 4, 6}}}},
               {"inbound_nodes", json::array()}},
              keras2_layer("MultiHeadAttention", "mha", {{"num_heads", 2}, {"key_dim", 3}}, {self}),
              keras2_layer("GroupedQueryAttention", "gqa",
                           {{"head_dim", 2}, {"num_query_heads", 4}, {"num_key_value_heads", 2}},
                           {self}),
              keras2_layer("Concatenate", "heads", json::object(),
                           {keras2_ref("mha", 0), keras2_ref("gqa", 0)}),
              keras2_layer("Flatten", "flat", json::object(), {keras2_ref("heads", 0)}),
              keras2_layer("Dense", "out", {{"units", 3}}, {keras2_ref("flat", 0)})}},
            {"input_layers", {{"x", 0, 0}}},
            {"output_layers", {{"out", 0, 0}}}}}};
}

void PrintTo(const LayerCase& c, std::ostream* os) {
  *os << c.name;
}

std::vector<LayerCase> layer_cases() {
  std::vector<LayerCase> cases;
  for (const char* act : {"linear", "relu", "tanh", "sigmoid", "softmax", "gelu", "elu", "selu",
                          "softplus", "softsign", "swish", "exponential"})
    cases.push_back({std::string("dense_") + act,
                     {7},
                     json::array({layer("Dense", {{"units", 6}, {"activation", act}})})});
  cases.push_back(
      {"dense_relu_without_bias",
       {7},
       json::array({layer("Dense", {{"units", 6}, {"activation", "relu"}, {"use_bias", false}})})});
  cases.push_back({"dense_over_a_sequence",
                   {4, 5},
                   json::array({layer("Dense", {{"units", 6}, {"activation", "tanh"}})})});
  cases.push_back(
      {"unit_normalization_identity",
       {4, 5},
       json::array({layer("Dense", {{"units", 6}}), layer("UnitNormalization", json::object()),
                    layer("Identity", json::object()),
                    layer("UnitNormalization", {{"axis", {1, 2}}})})});
  // ConvLSTM2D over 3 steps of 4x5 images, plain and with both dropouts: Keras 3's one mask for
  // the four gates, and in a model Keras 2 wrote a mask per gate (4-group convolutions).
  const json conv_lstm =
      layer("ConvLSTM2D",
            {{"filters", 3}, {"kernel_size", 3}, {"padding", "same"}, {"return_sequences", true}});
  json conv_lstm_dropout = conv_lstm;
  conv_lstm_dropout["config"]["dropout"] = 0.3;
  conv_lstm_dropout["config"]["recurrent_dropout"] = 0.2;
  cases.push_back({"conv_lstm", {3, 4, 5, 2}, json::array({conv_lstm})});
  cases.push_back({"conv_lstm_dropout", {3, 4, 5, 2}, json::array({conv_lstm_dropout})});
  json keras2_conv_lstm =
      sequential({3, 4, 5, 2}, json::array({conv_lstm_dropout, layer("Flatten", json::object()),
                                            layer("Dense", {{"units", 3}})}));
  keras2_conv_lstm["keras_version"] = "2.15.0";
  cases.push_back({"conv_lstm_dropout_keras2", {3, 4, 5, 2}, json::array(), 0, keras2_conv_lstm});
  cases.push_back(
      {"spectral_normalization",
       {4, 5, 2},
       json::array({layer("SpectralNormalization",
                          {{"layer", layer("Conv2D", {{"filters", 3}, {"kernel_size", 2}})},
                           {"power_iterations", 2}}),
                    layer("Flatten", json::object()),
                    layer("SpectralNormalization", {{"layer", layer("Dense", {{"units", 4}})}})})});
  cases.push_back({"adaptive_pooling",
                   {7, 5, 2},
                   json::array({layer("Conv2D", {{"filters", 3}, {"kernel_size", 2}}),
                                layer("AdaptiveMaxPooling2D", {{"output_size", {4, 3}}}),
                                layer("AdaptiveAveragePooling2D", {{"output_size", 2}})})});
  cases.push_back(
      {"rms_normalizations",
       {4, 5},
       json::array({layer("Dense", {{"units", 6}}), layer("RMSNormalization", json::object()),
                    layer("LayerNormalization", {{"rms_scaling", true}})})});
  cases.push_back({"activation_softmax",
                   {4, 5},
                   json::array({layer("Activation", {{"activation", "softmax"}})})});
  cases.push_back({"dropout",
                   {9},
                   json::array({layer("Dense", {{"units", 8}, {"activation", "relu"}}),
                                layer("Dropout", {{"rate", 0.3}})})});
  cases.push_back(
      {"conv2d_valid_relu",
       {9, 8, 3},
       json::array(
           {layer("Conv2D", {{"filters", 4}, {"kernel_size", {3, 3}}, {"activation", "relu"}})})});
  cases.push_back({"conv2d_same_stride2_tanh",
                   {9, 8, 3},
                   json::array({layer("Conv2D", {{"filters", 5},
                                                 {"kernel_size", {3, 2}},
                                                 {"strides", {2, 2}},
                                                 {"padding", "same"},
                                                 {"activation", "tanh"}})})});
  cases.push_back({"conv2d_dilated_without_bias",
                   {10, 9, 2},
                   json::array({layer("Conv2D", {{"filters", 3},
                                                 {"kernel_size", {3, 3}},
                                                 {"dilation_rate", {2, 2}},
                                                 {"use_bias", false}})})});
  cases.push_back(
      {"conv2d_even_kernel_same",
       {7, 7, 2},
       json::array(
           {layer("Conv2D", {{"filters", 3}, {"kernel_size", {2, 2}}, {"padding", "same"}})})});
  cases.push_back(
      {"one_dimensional_convolutions_causal_depthwise_separable",
       {9, 3},
       json::array(
           {layer("Conv1D", {{"filters", 4},
                             {"kernel_size", 3},
                             {"padding", "causal"},
                             {"activation", "relu"}}),
            layer("DepthwiseConv1D",
                  {{"kernel_size", 2}, {"depth_multiplier", 2}, {"padding", "same"}}),
            layer("SeparableConv1D",
                  {{"filters", 3}, {"kernel_size", 3}, {"strides", 2}, {"activation", "tanh"}})})});
  cases.push_back(
      {"max_pooling_valid",
       {9, 8, 3},
       json::array({layer("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}}),
                    layer("MaxPooling2D", {{"pool_size", {2, 2}}})})});
  cases.push_back(
      {"max_pooling_same_stride",
       {9, 7, 3},
       json::array({layer("MaxPooling2D",
                          {{"pool_size", {3, 3}}, {"strides", {2, 2}}, {"padding", "same"}})})});
  cases.push_back(
      {"average_pooling_same",
       {9, 7, 3},
       json::array({layer("AveragePooling2D", {{"pool_size", {2, 2}}, {"padding", "same"}})})});
  cases.push_back({"global_average_pooling",
                   {6, 5, 4},
                   json::array({layer("GlobalAveragePooling2D", json::object())})});
  cases.push_back({"batch_normalization_after_conv",
                   {8, 8, 2},
                   json::array({layer("Conv2D", {{"filters", 4}, {"kernel_size", 3}}),
                                layer("BatchNormalization", json::object()),
                                layer("Activation", {{"activation", "relu"}})})});
  cases.push_back({"batch_normalization_dense",
                   {7},
                   json::array({layer("Dense", {{"units", 6}}),
                                layer("BatchNormalization", {{"center", false}})})});
  cases.push_back({"conv2d_transpose_same_stride2",
                   {5, 4, 3},
                   json::array({layer("Conv2DTranspose", {{"filters", 4},
                                                          {"kernel_size", 3},
                                                          {"strides", 2},
                                                          {"padding", "same"},
                                                          {"activation", "relu"}})})});
  cases.push_back({"conv2d_transpose_valid_output_padding",
                   {4, 4, 2},
                   json::array({layer("Conv2DTranspose", {{"filters", 3},
                                                          {"kernel_size", 2},
                                                          {"strides", 3},
                                                          {"output_padding", 1}})})});
  cases.push_back({"depthwise_multiplier_same_stride2",
                   {7, 6, 3},
                   json::array({layer("DepthwiseConv2D", {{"kernel_size", 3},
                                                          {"strides", 2},
                                                          {"padding", "same"},
                                                          {"depth_multiplier", 2},
                                                          {"activation", "relu"}})})});
  cases.push_back({"separable_dilated",
                   {8, 8, 2},
                   json::array({layer("SeparableConv2D", {{"filters", 4},
                                                          {"kernel_size", 3},
                                                          {"dilation_rate", 2},
                                                          {"activation", "tanh"}})})});
  cases.push_back({"conv2d_groups",
                   {6, 5, 4},
                   json::array({layer("Conv2D", {{"filters", 6},
                                                 {"kernel_size", 3},
                                                 {"groups", 2},
                                                 {"padding", "same"}})})});
  // Volumes: Conv3D on the im2col path and the grouped kernels, the 3-D pooling, global pooling.
  cases.push_back(
      {"conv3d_pooling3d",
       {5, 6, 5, 2},
       json::array({layer("Conv3D", {{"filters", 4},
                                     {"kernel_size", {2, 3, 3}},
                                     {"padding", "same"},
                                     {"activation", "relu"}}),
                    layer("MaxPooling3D", {{"pool_size", 2}, {"padding", "same"}}),
                    layer("Conv3D", {{"filters", 4}, {"kernel_size", 2}, {"groups", 2}}),
                    layer("AveragePooling3D", {{"pool_size", {1, 2, 1}}}),
                    layer("GlobalAveragePooling3D", json::object())})});
  cases.push_back({"volume_pad_upsample_crop",
                   {3, 4, 2, 3},
                   json::array({layer("ZeroPadding3D", {{"padding", {{1, 0}, {0, 2}, {2, 1}}}}),
                                layer("UpSampling3D", {{"size", {2, 1, 3}}}),
                                layer("Cropping3D", {{"cropping", {{1, 2}, {0, 1}, {2, 0}}}}),
                                layer("Conv3D", {{"filters", 2}, {"kernel_size", 2}}),
                                layer("Conv3DTranspose", {{"filters", 2},
                                                          {"kernel_size", {2, 3, 2}},
                                                          {"strides", {1, 2, 2}},
                                                          {"padding", "same"}})})});
  cases.push_back(
      {"conv3d_strided_global_max",
       {6, 5, 7, 3},
       json::array({layer("Conv3D", {{"filters", 3}, {"kernel_size", 3}, {"strides", {2, 1, 2}}}),
                    layer("GlobalMaxPooling3D", {{"keepdims", true}})})});
  // EinsumDense: the batched products, the arrangements by axis swaps, the broadcast bias.
  cases.push_back({"einsum_dense",
                   {4, 5},
                   json::array({layer("EinsumDense", {{"equation", "abc,cde->abde"},
                                                      {"output_shape", {nullptr, 2, 3}},
                                                      {"bias_axes", "de"},
                                                      {"activation", "tanh"}}),
                                layer("EinsumDense", {{"equation", "abcd,edc->abe"},
                                                      {"output_shape", {nullptr, 6}},
                                                      {"bias_axes", "b"}}),
                                layer("EinsumDense", {{"equation", "abc,bcd->adb"},
                                                      {"output_shape", {3, 4}},
                                                      {"bias_axes", "d"},
                                                      {"activation", "softmax"}})})});
  cases.push_back({"spatial_dropout",
                   {6, 5, 4},
                   json::array({layer("SpatialDropout2D", {{"rate", 0.4}})})});
  cases.push_back({"gaussian_noise_and_dropout",
                   {9},
                   json::array({layer("GaussianNoise", {{"stddev", 0.3}}),
                                layer("Dense", {{"units", 8}}),
                                layer("GaussianDropout", {{"rate", 0.2}})})});
  cases.push_back(
      {"activity_regularizers",
       {6, 5, 2},
       json::array({layer("Conv2D", {{"filters", 3},
                                     {"kernel_size", 3},
                                     {"activation", "relu"},
                                     {"activity_regularizer", {{"class_name", "L1L2"},
                                                               {"config", {{"l1", 0.01}, {"l2", 0.02}}}}}}),
                    layer("MaxPooling2D", {{"pool_size", 2}}),
                    layer("Dense", {{"units", 5},
                                    {"activity_regularizer", "l2"}})})});
  cases.push_back({"resizing",
                   {5, 4, 2},
                   json::array({layer("Resizing", {{"height", 7}, {"width", 6}}),
                                layer("Resizing", {{"height", 3},
                                                   {"width", 4},
                                                   {"interpolation", "nearest"},
                                                   {"crop_to_aspect_ratio", true}}),
                                layer("Resizing", {{"height", 5},
                                                   {"width", 6},
                                                   {"pad_to_aspect_ratio", true},
                                                   {"fill_value", 0.5}})})});
  cases.push_back({"center_crop_window_then_smart_resize",
                   {7, 6, 2},
                   json::array({layer("CenterCrop", {{"height", 4}, {"width", 5}}),
                                layer("CenterCrop", {{"height", 6}, {"width", 3}})})});
  cases.push_back({"random_flip",
                   {5, 4, 2},
                   json::array({layer("RandomFlip", {{"seed", 3}}),
                                layer("Conv2D", {{"filters", 3}, {"kernel_size", 2}})})});
  cases.push_back(
      {"recurrent_layers",
       {7, 3},
       json::array(
           {layer("LSTM", {{"units", 5},
                           {"return_sequences", true},
                           {"dropout", 0.2},
                           {"recurrent_dropout", 0.3}}),
            layer("GRU", {{"units", 4}, {"return_sequences", true}, {"go_backwards", true}}),
            layer("GRU", {{"units", 3}, {"return_sequences", true}, {"reset_after", false}}),
            layer("Bidirectional", {{"layer",
                                     {{"class_name", "GRU"},
                                      {"config", {{"units", 2}, {"return_sequences", true}}}}},
                                    {"merge_mode", "mul"}}),
            layer("SimpleRNN", {{"units", 3}, {"return_sequences", true}}),
            layer("RNN", {{"return_sequences", true},
                          {"cell",
                           {{"class_name", "LSTMCell"},
                            {"config", {{"name", "lstm_cell_1"}, {"units", 2}}}}}}),
            layer("RNN", {{"go_backwards", true},
                          {"cell",
                           {{"class_name", "StackedRNNCells"},
                            {"config",
                             {{"cells",
                               {{{"class_name", "GRUCell"},
                                 {"config", {{"name", "gru_cell"}, {"units", 3}}}},
                                {{"class_name", "LSTMCell"},
                                 {"config", {{"name", "lstm_cell"}, {"units", 2}}}}}}}}}}})})});
  cases.push_back(
      {"masked_steps",
       {6},
       json::array({layer("Embedding", {{"input_dim", 11}, {"output_dim", 4}, {"mask_zero", true}}),
                    layer("LSTM", {{"units", 3}, {"return_sequences", true}}),
                    layer("GRU", {{"units", 2}})}),
       11});
  cases.push_back({"embedding",
                   {6},
                   json::array({layer("Embedding", {{"input_dim", 11}, {"output_dim", 4}})}),
                   11});
  cases.push_back(
      {"group_normalization",
       {4, 3, 4},
       json::array({layer("GroupNormalization", {{"groups", 2}}),
                    layer("Conv2D", {{"filters", 4}, {"kernel_size", 1}}),
                    layer("GroupNormalization", {{"groups", -1}, {"center", false}})})});
  const auto wrapped = [](const char* cls, json config) {
    return layer("TimeDistributed", {{"layer", {{"class_name", cls}, {"config", config}}}});
  };
  cases.push_back(
      {"time_distributed",
       {3, 4, 4, 2},
       json::array({wrapped("Conv2D", {{"filters", 3}, {"kernel_size", 2}, {"activation", "relu"}}),
                    wrapped("Dropout", {{"rate", 0.25}, {"seed", 4}}),
                    wrapped("Flatten", json::object()), wrapped("Dense", {{"units", 4}}),
                    layer("LSTM", {{"units", 3}})})});
  cases.push_back(
      {"recurrent_states_and_attention", {4, 3}, json::array(), 0, recurrent_states_model()});
  cases.push_back({"attention_heads", {4, 6}, json::array(), 0, attention_heads_model()});
  cases.push_back({"conv_lstm_states", {3, 6, 2}, json::array(), 0, conv_lstm_states_model()});
  return cases;
}

class CudaLayer : public ::testing::TestWithParam<LayerCase> {};

// One SGD step (learning rate 1: the weights move by the gradient) and a prediction, on the CPU
// and on cuda:0 from the same initial weights: outputs, loss, accuracy, updated weights and
// BatchNormalization's moving statistics agree to float32 rounding; then the second step's loss.
TEST_P(CudaLayer, OneStepMatchesTheCpu) {
  REQUIRE_GPU();
  const LayerCase& c = GetParam();
  json layers = c.layers;
  layers.push_back(layer("Flatten", json::object()));
  layers.push_back(layer("Dense", {{"units", 3}}));
  const json model = c.model.is_null() ? sequential(c.input, layers) : c.model;
  const json sgd = {{"class_name", "SGD"}, {"config", {{"learning_rate", 1.0}}}};
  const json loss = {{"class_name", "SparseCategoricalCrossentropy"},
                     {"config", {{"from_logits", true}}}};
  for (Precision precision : {Precision::fp32, Precision::tf32}) {
    SCOPED_TRACE(precision_name(precision));
    Side cpu(model, sgd, loss, json::array({"accuracy"}), "cpu", precision);
    Side gpu(model, sgd, loss, json::array({"accuracy"}), "cuda:0", precision);
    const double tolerance = precision == Precision::fp32 ? 1e-5 : 3e-3;
    Batch b = make_batch(c.input, {3}, 37, Targets::sparse, 11, c.vocabulary);

    Tensor out_cpu({37, 3}), out_gpu({37, 3});
    cpu.meta->predict(b.x, out_cpu.data());
    gpu.meta->predict(b.x, out_gpu.data());
    double diff = 0, scale = 1e-6;
    for (std::int64_t i = 0; i < out_cpu.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(out_cpu[i]) - out_gpu[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(out_cpu[i])));
    }
    EXPECT_LE(diff / scale, tolerance) << "predictions";

    const StepSums s_cpu = cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    const StepSums s_gpu = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    EXPECT_LE(relative(s_gpu.loss.sum, s_cpu.loss.sum), tolerance) << "loss";
    EXPECT_EQ(s_gpu.loss.count, s_cpu.loss.count);
    EXPECT_EQ(s_gpu.metrics.at(0).count, s_cpu.metrics.at(0).count);
    cpu.meta->apply_update();
    gpu.meta->apply_update();
    std::string where;
    const double worst =
        worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where);
    EXPECT_LE(worst, 10 * tolerance) << "weights after one step, worst at " << where;
    // A second step sees the updated weights on both sides (no operation keeps a stale copy).
    const StepSums t_cpu = cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    const StepSums t_gpu = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    EXPECT_LE(relative(t_gpu.loss.sum, t_cpu.loss.sum), 10 * tolerance) << "second step's loss";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLayer, CudaLayer, ::testing::ValuesIn(layer_cases()),
                         [](const auto& info) { return info.param.name; });

struct LossCase {
  std::string name;
  json loss;
  std::string last_activation;
  Targets targets;
  json metrics;
};

void PrintTo(const LossCase& c, std::ostream* os) {
  *os << c.name;
}

class CudaLoss : public ::testing::TestWithParam<LossCase> {};

// Every loss (from probabilities and from logits, with label smoothing) and metric: the sums of
// one batch and the weights after one Adam step.
TEST_P(CudaLoss, SumsAndStepMatchTheCpu) {
  REQUIRE_GPU();
  const LossCase& c = GetParam();
  const json model = sequential(
      {5}, json::array({layer("Dense", {{"units", 8}, {"activation", "tanh"}}),
                        layer("Dense", {{"units", 4}, {"activation", c.last_activation}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
  Side cpu(model, adam, c.loss, c.metrics, "cpu", Precision::fp32);
  Side gpu(model, adam, c.loss, c.metrics, "cuda:0", Precision::fp32);
  for (int step = 0; step < 3; ++step) {
    Batch b = make_batch({5}, {4}, 29, c.targets, 20 + static_cast<std::uint64_t>(step));
    const StepSums s_cpu = cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    const StepSums s_gpu = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    EXPECT_LE(relative(s_gpu.loss.sum, s_cpu.loss.sum), 1e-5) << "step " << step;
    for (std::size_t m = 0; m < s_cpu.metrics.size(); ++m) {
      EXPECT_LE(relative(s_gpu.metrics[m].sum, s_cpu.metrics[m].sum), 1e-5)
          << cpu.metrics[m]->name() << " step " << step;
      EXPECT_EQ(s_gpu.metrics[m].count, s_cpu.metrics[m].count) << cpu.metrics[m]->name();
    }
    cpu.meta->apply_update();
    gpu.meta->apply_update();
  }
  std::string where;
  EXPECT_LE(
      worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where),
      1e-4)
      << where;
}

INSTANTIATE_TEST_SUITE_P(
    EveryLoss, CudaLoss,
    ::testing::Values(
        LossCase{"mse", loss_spec("MeanSquaredError"), "linear", Targets::real,
                 json::array({"mse", "mae"})},
        LossCase{"mae", loss_spec("MeanAbsoluteError"), "linear", Targets::real,
                 json::array({"mae"})},
        LossCase{"bce_probabilities", loss_spec("BinaryCrossentropy"), "sigmoid", Targets::binary,
                 json::array({"accuracy"})},
        LossCase{"bce_logits_smoothed",
                 loss_spec("BinaryCrossentropy", {{"from_logits", true}, {"label_smoothing", 0.1}}),
                 "linear", Targets::binary, json::array({"binary_accuracy"})},
        LossCase{"cce_probabilities", loss_spec("CategoricalCrossentropy"), "softmax",
                 Targets::one_hot, json::array({"accuracy", "categorical_accuracy"})},
        LossCase{
            "cce_logits_smoothed",
            loss_spec("CategoricalCrossentropy", {{"from_logits", true}, {"label_smoothing", 0.2}}),
            "linear", Targets::one_hot, json::array({"accuracy"})},
        LossCase{"scce_probabilities", loss_spec("SparseCategoricalCrossentropy"), "softmax",
                 Targets::sparse, json::array({"accuracy"})},
        LossCase{"scce_logits", loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}}),
                 "linear", Targets::sparse, json::array({"sparse_categorical_accuracy"})}),
    [](const auto& info) { return info.param.name; });

class CudaOptimizer : public ::testing::TestWithParam<json> {};

// Every optimizer and clipping option: five steps on the CPU and on cuda:0 stay together.
TEST_P(CudaOptimizer, FiveStepsMatchTheCpu) {
  REQUIRE_GPU();
  const json model = sequential(
      {6},
      json::array({layer("Dense", {{"units", 9}, {"activation", "relu"}}),
                   layer("BatchNormalization", json::object()), layer("Dense", {{"units", 4}})}));
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side cpu(model, GetParam(), loss, json::array(), "cpu", Precision::fp32);
  Side gpu(model, GetParam(), loss, json::array(), "cuda:0", Precision::fp32);
  for (int step = 0; step < 5; ++step) {
    Batch b = make_batch({6}, {4}, 33, Targets::sparse, 40 + static_cast<std::uint64_t>(step));
    cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    cpu.meta->apply_update();
    gpu.meta->apply_update();
  }
  EXPECT_EQ(gpu.meta->optimizer().iterations(), 5);
  std::string where;
  EXPECT_LE(
      worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where),
      1e-4)
      << where;
  // The optimizer state mirrored to the host (what checkpoints save) is the CPU's too.
  Optimizer& oc = cpu.meta->optimizer();
  Optimizer& og = gpu.meta->optimizer();
  ASSERT_EQ(og.slotted_params(), oc.slotted_params());
  for (std::size_t p = 0; p < oc.slotted_params(); ++p)
    for (std::size_t s = 0; s < oc.slots(p).size(); ++s)
      for (std::int64_t k = 0; k < oc.slots(p)[s].size(); ++k)
        ASSERT_NEAR(og.slots(p)[s][k], oc.slots(p)[s][k],
                    1e-4 * std::max(1.0f, std::fabs(oc.slots(p)[s][k])))
            << "parameter " << p << " slot " << s;
  // use_ema's end of fit: the device's weights take the averages the CPU's take.
  if (cpu.meta->use_moving_averages()) {
    ASSERT_TRUE(gpu.meta->use_moving_averages());
    EXPECT_LE(
        worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where),
        1e-4)
        << where << " (the averages)";
  }
}

json opt(const std::string& cls, json config) {
  return {{"class_name", cls}, {"config", config}};
}

INSTANTIATE_TEST_SUITE_P(
    EveryOptimizer, CudaOptimizer,
    ::testing::Values(opt("SGD", {{"learning_rate", 0.1}}),
                      opt("SGD", {{"learning_rate", 0.05}, {"momentum", 0.9}, {"nesterov", true}}),
                      opt("Adam", {{"learning_rate", 0.01}, {"amsgrad", true}}),
                      opt("AdamW", {{"learning_rate", 0.01}, {"weight_decay", 0.05}}),
                      opt("RMSprop",
                          {{"learning_rate", 0.01}, {"momentum", 0.5}, {"centered", true}}),
                      opt("Adam", {{"learning_rate", 0.01}, {"clipnorm", 0.1}}),
                      opt("SGD", {{"learning_rate", 0.1}, {"global_clipnorm", 0.2}}),
                      opt("Adam", {{"learning_rate", 0.01}, {"clipvalue", 0.01}}),
                      opt("Adam", {{"learning_rate", 0.01},
                                   {"use_ema", true},
                                   {"ema_momentum", 0.8},
                                   {"ema_overwrite_frequency", 2}}),
                      opt("SGD", {{"learning_rate", 0.1},
                                  {"momentum", 0.9},
                                  {"use_ema", true},
                                  {"is_legacy_optimizer", false}}),
                      opt("Adam", {{"learning_rate", 0.01},
                                   {"gradient_accumulation_steps", 2},
                                   {"clipnorm", 0.5},
                                   {"use_ema", true}})),
    [](const auto& info) {
      return info.param["class_name"].template get<std::string>() + "_" +
             std::to_string(info.index);
    });

// The meta-model on cuda:0 against template-only training on the CPU (contract 1 on a GPU): a
// fashion-mlp-shaped model with Dropout, 20 Adam steps of 64 samples; every step's loss and the
// final weights follow the CPU's trajectory.
TEST(CudaReplica, TrainingTrajectoryFollowsTheCpu) {
  REQUIRE_GPU();
  const json model = sequential(
      {28, 28}, json::array({layer("Flatten", json::object()),
                             layer("Dense", {{"units", 64}, {"activation", "relu"}}),
                             layer("Dropout", {{"rate", 0.2}}), layer("Dense", {{"units", 10}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.001}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side cpu(model, adam, loss, json::array({"accuracy"}), "cpu", Precision::fp32);
  Side gpu(model, adam, loss, json::array({"accuracy"}), "cuda:0", Precision::fp32);
  for (int step = 0; step < 20; ++step) {
    Batch b =
        make_batch({28, 28}, {10}, 64, Targets::sparse, 300 + static_cast<std::uint64_t>(step));
    const StepSums s_cpu = cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    const StepSums s_gpu = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    EXPECT_LE(relative(s_gpu.loss.sum, s_cpu.loss.sum), 1e-4) << "step " << step;
    EXPECT_EQ(s_gpu.metrics[0].sum, s_cpu.metrics[0].sum) << "step " << step;
    cpu.meta->apply_update();
    gpu.meta->apply_update();
  }
  std::string where;
  EXPECT_LE(
      worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where),
      1e-3)
      << where;
}

// Mixed precision on cuda:0 against the CPU's bf16 backend: the same rounded operands summed in
// float32 in other orders, so the trajectories agree as fp32's do. The output layer is kept at
// float32 by its Keras dtype policy (on the GPU: the replica's float32 sibling backend).
TEST(CudaReplica, Bf16TrainingFollowsTheCpuInBf16WithAFloat32OutputLayer) {
  REQUIRE_GPU();
  if (const std::string why = backend::cpu_precision_unavailable(Precision::bf16); !why.empty())
    GTEST_SKIP() << "no CPU reference: " << why;
  const json model = sequential(
      {28, 28},
      json::array({layer("Flatten", json::object()),
                   layer("Dense", {{"units", 64}, {"activation", "relu"}}),
                   layer("Dropout", {{"rate", 0.2}}),
                   layer("Dense", {{"units", 10}, {"dtype", "float32"}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.001}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side cpu(model, adam, loss, json::array({"accuracy"}), "cpu", Precision::bf16);
  Side gpu(model, adam, loss, json::array({"accuracy"}), "cuda:0", Precision::bf16);
  Side fp32(model, adam, loss, json::array({"accuracy"}), "cuda:0", Precision::fp32);
  for (int step = 0; step < 20; ++step) {
    Batch b =
        make_batch({28, 28}, {10}, 64, Targets::sparse, 300 + static_cast<std::uint64_t>(step));
    const StepSums s_cpu = cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    const StepSums s_gpu = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    fp32.meta->forward_backward(b, *fp32.loss, fp32.metrics);
    EXPECT_LE(relative(s_gpu.loss.sum, s_cpu.loss.sum), 1e-4) << "step " << step;
    cpu.meta->apply_update();
    gpu.meta->apply_update();
    fp32.meta->apply_update();
  }
  std::string where;
  EXPECT_LE(
      worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where),
      1e-3)
      << where;
  // ... and it is bf16 indeed: float32 training went elsewhere.
  EXPECT_GT(
      worst_relative_difference(fp32.meta->template_model(), cpu.meta->template_model(), &where),
      1e-3);
}

// fp16 with Keras' dynamic loss scaling. From 2^15 nothing overflows: 20 steps follow float32
// training to half's rounding. From 2^30 the scaled gradients exceed half's 65504 (the logits'
// gradient is about scale·0.9/64, so about 2^22 is the largest scale that fits): the first steps
// are skipped (weights untouched, the scale halved each time) until the scale fits, then the run
// trains on, every weight finite.
TEST(CudaReplica, Fp16TrainsWithDynamicLossScaling) {
  REQUIRE_GPU();
  const json model = sequential(
      {28, 28}, json::array({layer("Flatten", json::object()),
                             layer("Dense", {{"units", 64}, {"activation", "relu"}}),
                             layer("Dense", {{"units", 10}})}));
  const auto scaled_adam = [](double initial) {
    return json{{"class_name", "LossScaleOptimizer"},
                {"config",
                 {{"inner_optimizer",
                   {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.001}}}}},
                  {"initial_scale", initial}}}};
  };
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.001}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side cpu(model, adam, loss, json::array({"accuracy"}), "cpu", Precision::fp32);
  Side gpu(model, scaled_adam(32768.0), loss, json::array({"accuracy"}), "cuda:0",
           Precision::fp16);
  Side overflow(model, scaled_adam(std::ldexp(1.0, 30)), loss, json::array({"accuracy"}),
                "cuda:0", Precision::fp16);
  std::int64_t applied_before = 0;
  for (int step = 0; step < 20; ++step) {
    Batch b =
        make_batch({28, 28}, {10}, 64, Targets::sparse, 400 + static_cast<std::uint64_t>(step));
    cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    overflow.meta->forward_backward(b, *overflow.loss, overflow.metrics);
    cpu.meta->apply_update();
    gpu.meta->apply_update();
    const LossScale& s = *overflow.optimizer->loss_scale();
    const std::int64_t skipped = s.skipped_steps();
    const double scale = s.scale();
    overflow.meta->apply_update();
    if (s.skipped_steps() > skipped) {
      EXPECT_EQ(s.scale(), scale / 2) << "step " << step;
      EXPECT_EQ(overflow.optimizer->iterations(), applied_before) << "step " << step;
    } else {
      ++applied_before;
    }
  }
  EXPECT_EQ(gpu.optimizer->loss_scale()->skipped_steps(), 0);
  std::string where;
  EXPECT_LE(
      worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where),
      2e-2)
      << where;
  const LossScale& s = *overflow.optimizer->loss_scale();
  EXPECT_GE(s.skipped_steps(), 4);
  EXPECT_LE(s.skipped_steps(), 12);
  EXPECT_EQ(s.scale(), std::ldexp(1.0, 30 - static_cast<int>(s.skipped_steps())));
  EXPECT_EQ(overflow.optimizer->iterations(), 20 - s.skipped_steps());
  for (Parameter* p : overflow.meta->template_model().parameters())
    for (float v : p->value.values()) ASSERT_TRUE(std::isfinite(v)) << p->name;
}

// A step replayed from a CUDA graph computes what the same step queued directly computes, bit
// for bit — also after a larger evaluation batch moved the buffers the graph was captured with,
// and for a last partial batch of another size.
// With Dropout: its call count lives on the device, so every replay draws the next mask (the
// count read back equals the host layer's: one per training step).
TEST(CudaReplica, GraphReplayEqualsDirectExecution) {
  REQUIRE_GPU();
  const json model = sequential(
      {28, 28}, json::array({layer("Flatten", json::object()),
                             layer("Dense", {{"units", 32}, {"activation", "relu"}}),
                             layer("Dropout", {{"rate", 0.3}}), layer("Dense", {{"units", 10}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.001}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  std::vector<std::vector<double>> losses(2);
  std::vector<std::unique_ptr<Side>> sides;
  for (const char* graphs : {"1", "0"}) {
    setenv("TANDEM_CUDA_GRAPHS", graphs, 1);
    sides.push_back(std::make_unique<Side>(model, adam, loss, json::array({"accuracy"}), "cuda:0",
                                           Precision::fp32));
  }
  unsetenv("TANDEM_CUDA_GRAPHS");
  for (int step = 0; step < 12; ++step) {
    const std::int64_t n = step == 11 ? 50 : 128;
    Batch b =
        make_batch({28, 28}, {10}, n, Targets::sparse, 700 + static_cast<std::uint64_t>(step));
    for (std::size_t k = 0; k < 2; ++k) {
      Side& s = *sides[k];
      losses[k].push_back(s.meta->forward_backward(b, *s.loss, s.metrics).loss.sum);
      s.meta->apply_update();
      if (step == 5) {
        Batch big = make_batch({28, 28}, {10}, 512, Targets::sparse, 9);
        losses[k].push_back(s.meta->evaluate(big, *s.loss, s.metrics).loss.sum);
      }
    }
  }
  EXPECT_EQ(losses[0], losses[1]);
  std::string where;
  EXPECT_EQ(worst_relative_difference(sides[0]->meta->template_model(),
                                      sides[1]->meta->template_model(), &where),
            0.0)
      << where;
  for (auto& side : sides) {
    const auto state = side->meta->template_model().layer(2).random_state();
    ASSERT_EQ(state.size(), 2u);
    EXPECT_EQ(state[1], 12u) << "Dropout's call count after 12 training steps";
  }
}

// Batches copied ahead (ReplicaModel::forward_backward's `next`, the trainer's look-ahead) train
// exactly what batches copied at their own step train, bit for bit: the next batch named right,
// named wrong (another batch comes instead), the same batch named again (its device copy kept),
// a batch changed in place without a promise (copied again), an evaluation in between, and a
// smaller last batch.
TEST(CudaReplica, BatchesCopiedAheadTrainWhatTheyHold) {
  REQUIRE_GPU();
  const json model = sequential(
      {12}, json::array({layer("Dense", {{"units", 16}, {"activation", "relu"}}),
                         layer("Dropout", {{"rate", 0.2}}), layer("Dense", {{"units", 5}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side plain(model, adam, loss, json::array({"accuracy"}), "cuda:0", Precision::fp32);
  Side ahead(model, adam, loss, json::array({"accuracy"}), "cuda:0", Precision::fp32);
  std::vector<Batch> batches;
  for (std::uint64_t i = 0; i < 6; ++i)
    batches.push_back(make_batch({12}, {5}, i == 5 ? 30 : 64, Targets::sparse, 40 + i));
  // Which batch each step trains, and which one the look-ahead names (-1: none).
  const std::vector<int> trains = {0, 1, 2, 2, 2, 3, 4, 4, 5};
  const std::vector<int> names = {1, 2, 2, 2, 4, 4, -1, 5, -1};  // step 4 names 4, 3 comes
  for (std::size_t step = 0; step < trains.size(); ++step) {
    Batch& b = batches[static_cast<std::size_t>(trains[step])];
    if (step == 7) b.x[3] += 0.5f;  // batch 4 changed in place; step 6 made no promise about it
    const Batch* next = names[step] < 0 ? nullptr : &batches[static_cast<std::size_t>(names[step])];
    const StepSums p = plain.meta->forward_backward(b, *plain.loss, plain.metrics);
    const StepSums a = ahead.meta->forward_backward(b, *ahead.loss, ahead.metrics, next);
    EXPECT_EQ(p.loss.sum, a.loss.sum) << "step " << step;
    EXPECT_EQ(p.metrics[0].sum, a.metrics[0].sum) << "step " << step;
    plain.meta->apply_update();
    ahead.meta->apply_update();
    if (step == 3) {
      Batch big = make_batch({12}, {5}, 200, Targets::sparse, 9);
      EXPECT_EQ(plain.meta->evaluate(big, *plain.loss, plain.metrics).loss.sum,
                ahead.meta->evaluate(big, *ahead.loss, ahead.metrics).loss.sum);
    }
  }
  std::string where;
  EXPECT_EQ(
      worst_relative_difference(ahead.meta->template_model(), plain.meta->template_model(), &where),
      0.0)
      << where;
}

// A padded tagger, its output carrying Embedding's mask: the loss divided by the batch's kept
// steps, which a GPU replica counts on the host (and two GPUs together) before its gradient.
// The GPU's trajectory follows two CPU replicas'; with two GPUs, a batch of one row leaves the
// second without rows, which still takes part in the count.
TEST(CudaReplica, AMaskedTaggerFollowsTheCpu) {
  REQUIRE_GPU();
  const json model = sequential(
      {6},
      json::array({layer("Embedding", {{"input_dim", 9}, {"output_dim", 4}, {"mask_zero", true}}),
                   layer("GRU", {{"units", 8}, {"return_sequences", true}}),
                   layer("Dense", {{"units", 3}, {"activation", "softmax"}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", json::object());
  const auto tokens = [](std::int64_t n, std::uint64_t seed) {
    Batch b;
    b.x = Tensor({n, 6});
    b.y = Tensor({n, 6});
    Rng rng(seed);
    for (std::int64_t r = 0; r < n; ++r) {
      const auto kept = 1 + static_cast<std::int64_t>(rng.below(6));
      for (std::int64_t t = 0; t < 6; ++t) {
        b.x[r * 6 + t] = t < kept ? static_cast<float>(1 + rng.below(8)) : 0.0f;
        b.y[r * 6 + t] = static_cast<float>(rng.below(3));
      }
    }
    return b;
  };
  const bool two = discover_devices().gpus.size() >= 2;
  Side cpu(model, adam, loss, json::array({"accuracy"}), "cpu:2", Precision::fp32);
  Side gpu(model, adam, loss, json::array({"accuracy"}), two ? "cuda:0,1" : "cuda:0",
           Precision::fp32);
  for (int step = 0; step < 10; ++step) {
    const Batch b = tokens(step == 9 ? 1 : 37, 70 + static_cast<std::uint64_t>(step));
    const StepSums s_cpu = cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    const StepSums s_gpu = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    EXPECT_LE(relative(s_gpu.loss.sum, s_cpu.loss.sum), 1e-4) << "step " << step;
    EXPECT_NEAR(s_gpu.metrics[0].mean(), s_cpu.metrics[0].mean(), 1e-6) << "step " << step;
    cpu.meta->apply_update();
    gpu.meta->apply_update();
  }
  std::string where;
  EXPECT_LE(
      worst_relative_difference(gpu.meta->template_model(), cpu.meta->template_model(), &where),
      1e-3)
      << where;
}

// Two GPUs in one meta-model equal one GPU holding the whole batch (skipped with one GPU).
TEST(CudaReplica, TwoGpusEqualOne) {
  REQUIRE_GPU();
  if (discover_devices().gpus.size() < 2) GTEST_SKIP() << "one GPU";
  const json model = sequential(
      {12}, json::array({layer("Dense", {{"units", 16}, {"activation", "relu"}}),
                         layer("Dropout", {{"rate", 0.25}}), layer("Dense", {{"units", 5}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side one(model, adam, loss, json::array(), "cuda:0", Precision::fp32);
  Side two(model, adam, loss, json::array(), "cuda:0,1", Precision::fp32);
  for (int step = 0; step < 10; ++step) {
    Batch b = make_batch({12}, {5}, 45, Targets::sparse, 500 + static_cast<std::uint64_t>(step));
    one.meta->forward_backward(b, *one.loss, one.metrics);
    two.meta->forward_backward(b, *two.loss, two.metrics);
    one.meta->apply_update();
    two.meta->apply_update();
  }
  std::string where;
  EXPECT_LE(
      worst_relative_difference(two.meta->template_model(), one.meta->template_model(), &where),
      1e-5)
      << where;
}

// Replica-local BatchNormalization on two GPUs keeps one set of moving statistics, averaged over
// the replicas after each forward as on two CPU replicas (docs/meta-model.md) — the device
// models' layers meet the average, not the host mirrors' — and a batch of one row, which leaves
// the second GPU without rows, still meets it instead of hanging the first.
TEST(CudaReplica, TwoGpusKeepOneSetOfMovingStatisticsAsTwoCpuReplicas) {
  REQUIRE_GPU();
  if (discover_devices().gpus.size() < 2) GTEST_SKIP() << "one GPU";
  const json model = sequential({12}, json::array({layer("Dense", {{"units", 8}}),
                                                   layer("BatchNormalization", {{"momentum", 0.9}}),
                                                   layer("Dense", {{"units", 5}})}));
  const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side cpu(model, adam, loss, json::array(), "cpu:2", Precision::fp32);
  Side gpus(model, adam, loss, json::array(), "cuda:0,1", Precision::fp32);
  for (int step = 0; step < 6; ++step) {
    const std::int64_t rows = step == 5 ? 1 : 45;
    Batch b = make_batch({12}, {5}, rows, Targets::sparse, 900 + static_cast<std::uint64_t>(step));
    cpu.meta->forward_backward(b, *cpu.loss, cpu.metrics);
    gpus.meta->forward_backward(b, *gpus.loss, gpus.metrics);
    cpu.meta->apply_update();
    gpus.meta->apply_update();
  }
  std::string where;
  EXPECT_LE(
      worst_relative_difference(gpus.meta->template_model(), cpu.meta->template_model(), &where),
      1e-4)
      << where;
}

// Contract 2 both ways: weights set on the host template reach the device (predictions equal the
// CPU's forward of the template), and trained device weights reach the template.
TEST(CudaReplica, TemplateMirrorsTheDeviceBothWays) {
  REQUIRE_GPU();
  const json model =
      sequential({5}, json::array({layer("Dense", {{"units", 7}, {"activation", "tanh"}}),
                                   layer("Dense", {{"units", 2}})}));
  const json sgd = {{"class_name", "SGD"}, {"config", {{"learning_rate", 0.5}}}};
  Side gpu(model, sgd, loss_spec("MeanSquaredError"), json::array(), "cuda:0", Precision::fp32);
  Model& t = gpu.meta->template_model();
  Rng rng(3);
  for (Parameter* p : t.parameters())
    for (std::int64_t k = 0; k < p->value.size(); ++k) p->value[k] = rng.uniform() - 0.5f;
  gpu.meta->broadcast_from_template();
  Batch b = make_batch({5}, {2}, 10, Targets::real, 9);
  Tensor on_gpu({10, 2});
  gpu.meta->predict(b.x, on_gpu.data());
  const Tensor on_cpu = t.forward(b.x, false).clone();
  for (std::int64_t i = 0; i < on_cpu.size(); ++i) EXPECT_NEAR(on_gpu[i], on_cpu[i], 1e-5);

  const std::vector<float> before(t.parameters()[0]->value.data(),
                                  t.parameters()[0]->value.data() + 35);
  gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
  gpu.meta->apply_update();
  Model& after = gpu.meta->template_model();
  bool moved = false;
  for (std::int64_t k = 0; k < 35; ++k)
    moved = moved || after.parameters()[0]->value[k] != before[static_cast<std::size_t>(k)];
  EXPECT_TRUE(moved) << "the template did not receive the trained weights";
}

// Bad inputs get the CPU's errors, and the replica keeps working afterwards.
TEST(CudaReplica, BadLabelsAreTheCpusErrorAndLoseNothing) {
  REQUIRE_GPU();
  const json model = sequential({4}, json::array({layer("Dense", {{"units", 3}})}));
  const json loss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});
  Side gpu(model, "sgd", loss, json::array(), "cuda:0", Precision::fp32);
  Batch b = make_batch({4}, {3}, 8, Targets::sparse, 1);
  b.y[5] = 3;  // not a class of 3
  try {
    gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
    FAIL() << "no error for label 3 of 3 classes";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("label 3"), std::string::npos) << e.what();
  }
  b.y[5] = 2;
  const StepSums s = gpu.meta->forward_backward(b, *gpu.loss, gpu.metrics);
  EXPECT_TRUE(std::isfinite(s.loss.sum));
}

TEST(CudaReplica, SynchronizedBatchNormalizationIsRefusedClearly) {
  REQUIRE_GPU();
  const json model =
      sequential({4}, json::array({layer("BatchNormalization", {{"synchronized", true}}),
                                   layer("Dense", {{"units", 2}})}));
  try {
    Side gpu(model, "sgd", loss_spec("MeanSquaredError"), json::array(), "cuda:0", Precision::fp32);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("synchronized"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
