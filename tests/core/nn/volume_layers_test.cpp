// The volume layers from their Keras configs: Conv3D, Conv3DTranspose, MaxPooling3D,
// AveragePooling3D, GlobalAveragePooling3D, GlobalMaxPooling3D, ZeroPadding3D, Cropping3D,
// UpSampling3D, and the convolutional LSTMs over sequences of images. Shapes and parameter counts computed by hand
// from TensorFlow's definitions (their values and gradients are checked against PyTorch in
// tests/oracle and against the CUDA index math in window_math_test), Keras' weight layout, the
// config written back, and every bad key or shape refused at its JSON path.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "keras_config_builders.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json entry(const std::string& cls, json config) {
  return {{"class_name", cls}, {"config", std::move(config)}};
}

// A Sequential model over volumes of `input` (depth, rows, cols, channels).
json volume_model(const Shape& input, const std::vector<json>& layers) {
  json all = json::array({entry(
      "InputLayer", {{"batch_input_shape", {nullptr, input[0], input[1], input[2], input[3]}}})});
  for (const json& l : layers) all.push_back(l);
  return {{"class_name", "Sequential"}, {"config", {{"name", "v"}, {"layers", all}}}};
}

TEST(Conv3D, ShapesWeightsAndConfigAsKeras) {
  // depth 5 same stride 1 -> 5; rows 6 same stride 2 -> 3; cols 7 same stride 2 -> 4.
  auto m =
      Model::from_config(volume_model({5, 6, 7, 2}, {entry("Conv3D", {{"filters", 3},
                                                                      {"kernel_size", {2, 3, 3}},
                                                                      {"strides", {1, 2, 2}},
                                                                      {"padding", "same"},
                                                                      {"activation", "relu"}})}),
                         "model", 0);
  EXPECT_EQ(m->layer(0).class_name(), "Conv3D");
  EXPECT_EQ(m->layer(0).name(), "conv3d");
  EXPECT_EQ(m->output_shape(), (Shape{5, 3, 4, 3}));
  EXPECT_EQ(m->count_params(), 2 * 3 * 3 * 2 * 3 + 3);
  const std::vector<Parameter*> params = m->layer(0).parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "kernel");
  EXPECT_EQ(params[0]->value.shape(), (Shape{2, 3, 3, 2, 3}));  // (kd, kh, kw, in, filters)
  const json cfg = m->layer(0).config();
  EXPECT_EQ(cfg["kernel_size"], json::array({2, 3, 3}));
  EXPECT_EQ(cfg["strides"], json::array({1, 2, 2}));
  EXPECT_EQ(cfg["dilation_rate"], json::array({1, 1, 1}));
  EXPECT_EQ(cfg["padding"], "same");
  auto again = Model::from_config(volume_model({5, 6, 7, 2}, {entry("Conv3D", cfg)}), "model", 0);
  EXPECT_EQ(again->layer(0).config(), cfg);

  // valid, dilated, grouped: depth 6 - (2 - 1) * 2 = 4, rows 5 - 1 = 4, cols 7 - 2 * 2 = 3.
  auto grouped =
      Model::from_config(volume_model({6, 5, 7, 4}, {entry("Conv3D", {{"filters", 6},
                                                                      {"kernel_size", {2, 2, 3}},
                                                                      {"dilation_rate", {2, 1, 2}},
                                                                      {"groups", 2},
                                                                      {"use_bias", false}})}),
                         "model", 0);
  EXPECT_EQ(grouped->output_shape(), (Shape{4, 4, 3, 6}));
  EXPECT_EQ(grouped->layer(0).parameters()[0]->value.shape(), (Shape{2, 2, 3, 2, 6}));
}

TEST(Conv3D, BadKeysAndShapesAreRefusedAtTheirPlace) {
  const std::string at = "'model.config.layers[1].config.";
  auto error = [](const json& model) { return test::model_config_error(model); };
  auto expect_error = [&](const json& conv, const std::string& where, const std::string& what) {
    const std::string e = error(volume_model({4, 5, 6, 2}, {entry("Conv3D", conv)}));
    EXPECT_NE(e.find(at + where + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  expect_error({{"filters", 2}, {"kernel_size", {3, 3}}}, "kernel_size", "a list of 3 integers");
  expect_error({{"filters", 2}, {"kernel_size", {3, 3, 0}}}, "kernel_size[2]", "positive");
  expect_error({{"filters", 2}, {"kernel_size", 2}, {"strides", {1, "2", 1}}}, "strides[1]",
               "positive integer");
  expect_error(
      {{"filters", 2}, {"kernel_size", 2}, {"strides", {2, 1, 1}}, {"dilation_rate", {1, 1, 2}}},
      "dilation_rate", "strides > 1");
  expect_error({{"filters", 2}, {"kernel_size", 2}, {"data_format", "channels_first"}},
               "data_format", "channels_last");
  expect_error({{"filters", 3}, {"kernel_size", 2}, {"groups", 2}}, "groups",
               "must divide filters (3)");
  // A kernel deeper than the volume, and an image given to Conv3D: shape errors naming the layer.
  const std::string deep = error(
      volume_model({4, 5, 6, 2}, {entry("Conv3D", {{"filters", 2}, {"kernel_size", {5, 1, 1}}})}));
  EXPECT_NE(deep.find("layer 'conv3d' (Conv3D): kernel (5, 1, 1) is larger than its input "
                      "(None, 4, 5, 6, 2)"),
            std::string::npos)
      << deep;
  const json image = {{"class_name", "Sequential"},
                      {"config",
                       {{"layers",
                         {entry("InputLayer", {{"batch_input_shape", {nullptr, 5, 6, 2}}}),
                          entry("Conv3D", {{"filters", 2}, {"kernel_size", 2}})}}}}};
  const std::string flat = error(image);
  EXPECT_NE(flat.find("expects inputs (None, depth, rows, cols, channels), got (None, 5, 6, 2)"),
            std::string::npos)
      << flat;
}

TEST(Pooling3D, ShapesDefaultsAndConfigAsKeras) {
  // MaxPooling3D's defaults: pool (2, 2, 2), strides = pool, valid: (5, 6, 7) -> (2, 3, 3).
  // AveragePooling3D same, pool (3, 2, 2), strides (2, 2, 1): (2, 3, 3) -> (1, 2, 3).
  auto m = Model::from_config(
      volume_model({5, 6, 7, 3},
                   {entry("MaxPooling3D", json::object()),
                    entry("AveragePooling3D",
                          {{"pool_size", {3, 2, 2}}, {"strides", {2, 2, 1}}, {"padding", "same"}}),
                    entry("GlobalMaxPooling3D", {{"keepdims", true}}),
                    entry("GlobalAveragePooling3D", json::object())}),
      "model", 0);
  EXPECT_EQ(m->layer(0).class_name(), "MaxPooling3D");
  EXPECT_EQ(m->layer(1).class_name(), "AveragePooling3D");
  EXPECT_EQ(m->layer(2).class_name(), "GlobalMaxPooling3D");
  EXPECT_EQ(m->layer(3).class_name(), "GlobalAveragePooling3D");
  EXPECT_EQ(m->layer(0).config()["pool_size"], json::array({2, 2, 2}));
  EXPECT_EQ(m->layer(0).config()["strides"], json::array({2, 2, 2}));
  EXPECT_EQ(m->layer(1).config()["strides"], json::array({2, 2, 1}));
  EXPECT_EQ(m->output_shape(), (Shape{3}));
  const json summary = m->config();
  auto shapes = Model::from_config(
      volume_model({5, 6, 7, 3}, {entry("MaxPooling3D", json::object()),
                                  entry("AveragePooling3D", {{"pool_size", {3, 2, 2}},
                                                             {"strides", {2, 2, 1}},
                                                             {"padding", "same"}})}),
      "model", 0);
  EXPECT_EQ(shapes->output_shape(), (Shape{1, 2, 3, 3}));
  auto keep = Model::from_config(
      volume_model({2, 3, 4, 5}, {entry("GlobalMaxPooling3D", {{"keepdims", true}})}), "model", 0);
  EXPECT_EQ(keep->output_shape(), (Shape{1, 1, 1, 5}));
  // The model's own config builds the same model again.
  EXPECT_EQ(Model::from_config(summary, "model", 0)->config(), summary);
}

TEST(Pooling3D, BadKeysAndShapesAreRefusedAtTheirPlace) {
  auto error = [](const json& layer) {
    return test::model_config_error(volume_model({4, 5, 6, 2}, {layer}));
  };
  const std::string pair = error(entry("MaxPooling3D", {{"pool_size", {2, 2}}}));
  EXPECT_NE(pair.find("'model.config.layers[1].config.pool_size'"), std::string::npos) << pair;
  EXPECT_NE(pair.find("a list of 3 integers"), std::string::npos) << pair;
  const std::string deep = error(entry("AveragePooling3D", {{"pool_size", {5, 1, 1}}}));
  EXPECT_NE(deep.find("layer 'average_pooling3d' (AveragePooling3D): pool_size (5, 1, 1) is "
                      "larger than its input (None, 4, 5, 6, 2)"),
            std::string::npos)
      << deep;
  const std::string format =
      error(entry("GlobalAveragePooling3D", {{"data_format", "channels_first"}}));
  EXPECT_NE(format.find("data_format"), std::string::npos) << format;
  const json image = {{"class_name", "Sequential"},
                      {"config",
                       {{"layers",
                         {entry("InputLayer", {{"batch_input_shape", {nullptr, 5, 6, 2}}}),
                          entry("GlobalMaxPooling3D", json::object())}}}}};
  const std::string flat = test::model_config_error(image);
  EXPECT_NE(flat.find("expects inputs (None, depth, rows, cols, channels), got (None, 5, 6, 2)"),
            std::string::npos)
      << flat;
}

// ZeroPadding3D, Cropping3D and UpSampling3D: Keras' three forms of their amounts, the shapes
// they give, their configs written back, and refusals at their paths.
TEST(VolumeCells, AmountsShapesAndConfigAsKeras) {
  auto built = [](const json& layer) {
    return Model::from_config(volume_model({4, 5, 6, 2}, {layer}), "model", 0);
  };
  auto pad = built(entry("ZeroPadding3D", {{"padding", {{1, 0}, {0, 2}, {3, 1}}}}));
  EXPECT_EQ(pad->output_shape(), (Shape{5, 7, 10, 2}));
  EXPECT_EQ(pad->layer(0).config()["padding"], json::parse("[[1, 0], [0, 2], [3, 1]]"));
  EXPECT_EQ(built(entry("ZeroPadding3D", json::object()))->output_shape(), (Shape{6, 7, 8, 2}));
  EXPECT_EQ(built(entry("ZeroPadding3D", {{"padding", {1, 2, 0}}}))->output_shape(),
            (Shape{6, 9, 6, 2}));
  auto crop = built(entry("Cropping3D", {{"cropping", 1}}));
  EXPECT_EQ(crop->output_shape(), (Shape{2, 3, 4, 2}));
  EXPECT_EQ(crop->layer(0).config()["cropping"], json::parse("[[1, 1], [1, 1], [1, 1]]"));
  EXPECT_EQ(built(entry("Cropping3D", json::object()))->output_shape(), (Shape{4, 5, 6, 2}));
  auto up = built(entry("UpSampling3D", {{"size", {2, 1, 3}}}));
  EXPECT_EQ(up->output_shape(), (Shape{8, 5, 18, 2}));
  EXPECT_EQ(up->layer(0).config()["size"], json::array({2, 1, 3}));
  EXPECT_EQ(built(entry("UpSampling3D", json::object()))->output_shape(), (Shape{8, 10, 12, 2}));
  // Each config builds the same layer again.
  for (auto* m : {pad.get(), crop.get(), up.get()}) {
    const json cfg = m->config();
    EXPECT_EQ(Model::from_config(cfg, "model", 0)->config(), cfg);
  }

  auto error = [](const json& layer) {
    return test::model_config_error(volume_model({4, 5, 6, 2}, {layer}));
  };
  const std::string two = error(entry("ZeroPadding3D", {{"padding", {1, 2}}}));
  EXPECT_NE(two.find("'model.config.layers[1].config.padding'"), std::string::npos) << two;
  EXPECT_NE(two.find("expected n, [depth, rows, cols] or"), std::string::npos) << two;
  const std::string negative =
      error(entry("Cropping3D", {{"cropping", {{0, 1}, {1, -1}, {0, 0}}}}));
  EXPECT_NE(negative.find("'model.config.layers[1].config.cropping[1][1]'"), std::string::npos)
      << negative;
  const std::string mixed = error(entry("ZeroPadding3D", {{"padding", {{1, 1}, 2, 3}}}));
  EXPECT_NE(mixed.find("config.padding'"), std::string::npos) << mixed;
  const std::string all = error(entry("Cropping3D", {{"cropping", {{2, 2}, {0, 0}, {0, 0}}}}));
  EXPECT_NE(all.find("layer 'cropping3d' (Cropping3D) crops 4 depth slices from inputs "
                     "(None, 4, 5, 6, 2): nothing would be left"),
            std::string::npos)
      << all;
  const std::string size = error(entry("UpSampling3D", {{"size", {2, 0, 1}}}));
  EXPECT_NE(size.find("config.size[1]'"), std::string::npos) << size;
  const std::string interpolation =
      error(entry("UpSampling3D", {{"data_format", "channels_first"}}));
  EXPECT_NE(interpolation.find("data_format"), std::string::npos) << interpolation;
}

// Conv3DTranspose: Keras' deconv_output_length along each axis, by hand; the kernel (kd, kh, kw,
// filters, in); output_padding as a triple; refusals at their paths.
TEST(Conv3DTranspose, ShapesWeightsAndConfigAsKeras) {
  // same: n · stride (3·1, 4·2, 3·2); valid: n·s + max(span - s, 0): 3·2 + 1, 2·3 + 0, 3·2 + 1;
  // with output_padding (n - 1)·s + span + extra: 2·2 + 3 + 1, 1·3 + 3 + 2, 2·2 + 3 + 0.
  auto built = [](const Shape& input, const json& cfg) {
    return Model::from_config(volume_model(input, {entry("Conv3DTranspose", cfg)}), "model", 0);
  };
  auto same = built(
      {3, 4, 3, 2},
      {{"filters", 3}, {"kernel_size", {2, 3, 3}}, {"strides", {1, 2, 2}}, {"padding", "same"}});
  EXPECT_EQ(same->layer(0).class_name(), "Conv3DTranspose");
  EXPECT_EQ(same->output_shape(), (Shape{3, 8, 6, 3}));
  EXPECT_EQ(same->layer(0).parameters()[0]->value.shape(), (Shape{2, 3, 3, 3, 2}));
  EXPECT_EQ(same->count_params(), 2 * 3 * 3 * 3 * 2 + 3);
  EXPECT_EQ(built({3, 2, 3, 3}, {{"filters", 2}, {"kernel_size", 3}, {"strides", {2, 3, 2}}})
                ->output_shape(),
            (Shape{7, 6, 7, 2}));
  auto padded = built(
      {3, 2, 3, 3},
      {{"filters", 2}, {"kernel_size", 3}, {"strides", {2, 3, 2}}, {"output_padding", {1, 2, 0}}});
  EXPECT_EQ(padded->output_shape(), (Shape{8, 8, 7, 2}));
  const json cfg = padded->layer(0).config();
  EXPECT_EQ(cfg["output_padding"], json::array({1, 2, 0}));
  EXPECT_EQ(cfg["kernel_size"], json::array({3, 3, 3}));
  EXPECT_EQ(cfg["strides"], json::array({2, 3, 2}));
  EXPECT_EQ(built({3, 2, 3, 3}, cfg)->layer(0).config(), cfg);

  auto error = [](const json& conv) {
    return test::model_config_error(volume_model({3, 2, 3, 3}, {entry("Conv3DTranspose", conv)}));
  };
  const std::string big = error(
      {{"filters", 2}, {"kernel_size", 3}, {"strides", {2, 3, 2}}, {"output_padding", {1, 3, 0}}});
  EXPECT_NE(big.find("'model.config.layers[1].config.output_padding'"), std::string::npos) << big;
  EXPECT_NE(big.find("less than its stride [2,3,2]"), std::string::npos) << big;
  const std::string pair = error({{"filters", 2}, {"kernel_size", 3}, {"output_padding", {0, 0}}});
  EXPECT_NE(pair.find("a list of 3 integers"), std::string::npos) << pair;
  const std::string groups = error({{"filters", 2}, {"kernel_size", 3}, {"groups", 2}});
  EXPECT_NE(groups.find("config.groups'"), std::string::npos) << groups;
  const std::string sizes = error({{"filters", 2}, {"kernel_size", {3, 3}}});
  EXPECT_NE(sizes.find("config.kernel_size'"), std::string::npos) << sizes;
}

// A Sequential model over sequences of images (steps, rows, cols, channels).
json clip_model(const Shape& input, const std::vector<json>& layers) {
  json batch_shape = json::array({nullptr});
  for (std::int64_t d : input) batch_shape.push_back(d);
  json all = json::array({entry("InputLayer", {{"batch_input_shape", batch_shape}})});
  for (const json& l : layers) all.push_back(l);
  return {{"class_name", "Sequential"}, {"config", {{"name", "clips"}, {"layers", all}}}};
}

// ConvLSTM1D/2D/3D: shapes by hand, Keras' weight shapes and names, unit_forget_bias' ones, the
// config written back, refusals at their paths.
TEST(ConvLstm, ShapesWeightsAndConfigAsKeras) {
  // 2-D valid 3x3 over 6x7: 4x5; strides (1, 2) same over 6x7: 6x4.
  auto m = Model::from_config(
      clip_model({5, 6, 7, 2}, {entry("ConvLSTM2D", {{"filters", 3},
                                                    {"kernel_size", 3},
                                                    {"return_sequences", true}})}),
      "model", 0);
  EXPECT_EQ(m->layer(0).class_name(), "ConvLSTM2D");
  EXPECT_EQ(m->layer(0).name(), "conv_lstm2d");
  EXPECT_EQ(m->output_shape(), (Shape{5, 4, 5, 3}));
  const std::vector<Parameter*> p = m->layer(0).parameters();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0]->name, "conv_lstm_cell/kernel");
  EXPECT_EQ(p[0]->value.shape(), (Shape{3, 3, 2, 12}));
  EXPECT_EQ(p[1]->name, "conv_lstm_cell/recurrent_kernel");
  EXPECT_EQ(p[1]->value.shape(), (Shape{3, 3, 3, 12}));
  EXPECT_EQ(p[2]->value.shape(), (Shape{12}));
  for (std::int64_t j = 0; j < 12; ++j)  // zeros, but the forget gate's ones
    EXPECT_EQ(p[2]->value[j], j >= 3 && j < 6 ? 1.0f : 0.0f) << j;
  EXPECT_EQ(m->count_params(), 3 * 3 * 2 * 12 + 3 * 3 * 3 * 12 + 12);
  const json cfg = m->layer(0).config();
  EXPECT_EQ(cfg["kernel_size"], json::array({3, 3}));
  EXPECT_EQ(cfg["unit_forget_bias"], true);
  EXPECT_EQ(Model::from_config(clip_model({5, 6, 7, 2}, {entry("ConvLSTM2D", cfg)}), "model", 0)
                ->layer(0)
                .config(),
            cfg);
  EXPECT_EQ(Model::from_config(clip_model({5, 6, 7, 2}, {entry("ConvLSTM2D", {{"filters", 2},
                                                                            {"kernel_size", 3},
                                                                            {"strides", {1, 2}},
                                                                            {"padding", "same"}})}),
                               "model", 0)
                ->output_shape(),
            (Shape{6, 4, 2}));
  EXPECT_EQ(Model::from_config(clip_model({4, 9, 2}, {entry("ConvLSTM1D", {{"filters", 2},
                                                                          {"kernel_size", 3}})}),
                               "model", 0)
                ->output_shape(),
            (Shape{7, 2}));
  EXPECT_EQ(Model::from_config(clip_model({2, 3, 4, 5, 1}, {entry("ConvLSTM3D", {{"filters", 2},
                                                                               {"kernel_size", 2}})}),
                               "model", 0)
                ->output_shape(),
            (Shape{2, 3, 4, 2}));

  auto error = [](const json& layer) {
    return test::model_config_error(clip_model({5, 6, 7, 2}, {layer}));
  };
  auto expect_error = [&](const json& cfg, const std::string& where, const std::string& what) {
    const std::string e = error(entry("ConvLSTM2D", cfg));
    EXPECT_NE(e.find("'model.config.layers[1].config." + where + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"dropout", 1.5}}, "dropout", "1.5");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"recurrent_dropout", -0.1}},
               "recurrent_dropout", "-0.1");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"dropout", 0.2}, {"seed", -3}}, "seed",
               "expected an integer >= 0");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"stateful", true}}, "stateful",
               "not supported");
  expect_error({{"filters", 2}, {"kernel_size", {3, 3, 3}}}, "kernel_size", "a list of 2");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"strides", 2}, {"dilation_rate", 2}},
               "dilation_rate", "strides > 1");
  expect_error({{"filters", 2}, {"kernel_size", 3}, {"recurrent_activation", "softmax"}},
               "recurrent_activation", "softmax");
  expect_error({{"kernel_size", 3}}, "filters", "required key is missing");
  const std::string image = test::model_config_error(
      clip_model({6, 7, 2}, {entry("ConvLSTM2D", {{"filters", 2}, {"kernel_size", 3}})}));
  EXPECT_NE(image.find("(ConvLSTM2D) expects inputs (None, time, rows, cols, channels)"),
            std::string::npos)
      << image;
}

// initial_state: two states of the output grid's shape, (grid..., filters); another count or
// shape is refused naming the layer.
TEST(ConvLstm, InitialStatesOfAnotherCountOrShapeAreNamed) {
  using test::keras2_layer;
  using test::keras2_ref;
  const auto model = [](std::vector<json> refs) {
    return json{{"class_name", "Functional"},
                {"config",
                 {{"layers",
                   {{{"class_name", "InputLayer"},
                     {"name", "x"},
                     {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 3, 6, 2}}}},
                     {"inbound_nodes", json::array()}},
                    keras2_layer("ConvLSTM1D", "encoder",
                                 {{"filters", 2}, {"kernel_size", 3}, {"return_state", true}},
                                 {keras2_ref("x", 0)}),
                    keras2_layer("ConvLSTM1D", "decoder",
                                 {{"filters", 2}, {"kernel_size", 3}, {"padding", "same"}}, refs)}},
                  {"input_layers", {{"x", 0, 0}}},
                  {"output_layers", {{"decoder", 0, 0}}}}}};
  };
  // The encoder's states are (4, 2) ("valid" over 6 cells), the same decoder's are (6, 2).
  EXPECT_NE(test::model_config_error(
                model({keras2_ref("x", 0), keras2_ref("encoder", 1), keras2_ref("encoder", 2)}))
                .find("(ConvLSTM1D): initial state 0 has shape (None, 4, 2), but the layer's "
                      "states are (None, 6, 2)"),
            std::string::npos);
  EXPECT_NE(test::model_config_error(model({keras2_ref("x", 0), keras2_ref("encoder", 1)}))
                .find("(ConvLSTM1D) starts from 2 initial states (h and c), got 1"),
            std::string::npos);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
