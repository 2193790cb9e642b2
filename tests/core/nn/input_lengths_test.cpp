// Inputs whose lengths a Keras config leaves null (nn/input_lengths.hpp): built for the data's
// lengths, the config written back with Keras' nulls, the data asked for only when needed, the
// same weights at any length, and every way the data can fail to fit named.
#include "nn/input_lengths.hpp"

#include <gtest/gtest.h>

#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json layer(const std::string& cls, json cfg) {
  return {{"class_name", cls}, {"config", cfg}};
}
json sequential(std::vector<json> layers) {
  return {{"class_name", "Sequential"}, {"config", {{"name", "seq"}, {"layers", layers}}}};
}
Model::DataInputShapes data(std::vector<Shape> shapes, int* asked = nullptr) {
  return [shapes, asked](const std::vector<Shape>&) {
    if (asked) ++*asked;
    return shapes;
  };
}
// The ConfigError or ShapeError message of building `config` with `shapes`.
std::string build_error(const json& config, const Model::DataInputShapes& shapes) {
  try {
    Model::from_config(config, "model", 0, shapes);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Keras 2's LSTM(4, input_shape=(None, 3)): the shape on the first layer.
json lstm_of_any_length() {
  return sequential({layer(
      "LSTM", {{"name", "lstm"}, {"units", 4}, {"batch_input_shape", {nullptr, nullptr, 3}}})});
}

TEST(InputLengths, AModelIsBuiltForTheDatasLengthsAndWritesItsNullsBack) {
  int asked = 0;
  auto model = Model::from_config(lstm_of_any_length(), "model", 0, data({{7, 3}}, &asked));
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(model->input_shape(), (Shape{7, 3}));
  EXPECT_EQ(model->declared_input_shape(0), (Shape{kAnyLength, 3}));
  EXPECT_TRUE(model->has_lengths_from_data());
  EXPECT_EQ(model->config()["config"]["layers"][0]["config"]["batch_input_shape"],
            json({nullptr, nullptr, 3}));
  EXPECT_EQ(model->clone()->input_shape(), (Shape{7, 3}));
  EXPECT_EQ(nn::declared_shape_text(model->declared_input_shape(0), true), "(None, None, 3)");
  EXPECT_EQ(nn::declared_shape_text({kAnyLength}, false), "(None,)");
  EXPECT_EQ(nn::declared_shape_text({}, true), "(None,)");
  EXPECT_EQ(nn::declared_shape_text({4, kAnyLength}, false), "(4, None)");

  // A model of fixed shapes never asks for the data.
  auto fixed = Model::from_config(sequential({layer("InputLayer", {{"batch_shape", {nullptr, 5}}}),
                                              layer("Dense", {{"units", 2}})}),
                                  "model", 0, data({{9}}, &asked));
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(fixed->has_lengths_from_data());
  EXPECT_EQ(fixed->input_shape(), (Shape{5}));
}

TEST(InputLengths, TheSameWeightsServeEveryLength) {
  // Embedding -> GlobalMaxPooling1D -> Dense: a sequence and the same sequence with one of its
  // tokens repeated give the same output, at lengths 5 and 9, with one model's weights.
  const json config =
      sequential({layer("InputLayer", {{"batch_shape", {nullptr, nullptr}}, {"dtype", "int32"}}),
                  layer("Embedding", {{"name", "embedding"}, {"input_dim", 10}, {"output_dim", 4}}),
                  layer("GlobalMaxPooling1D", {{"name", "pool"}}),
                  layer("Dense", {{"name", "dense"}, {"units", 2}})});
  auto short_model = Model::from_config(config, "model", 1, data({{5}}));
  auto long_model = Model::from_config(config, "model", 2, data({{9}}));
  CheckpointData weights;
  short_model->save_weights(weights);
  EXPECT_EQ(long_model->load_weights(weights, "short"), "");
  const std::vector<float> tokens = {3, 1, 4, 1, 5}, padded = {3, 1, 4, 1, 5, 5, 5, 3, 4};
  Tensor x({1, 5}), y({1, 9});
  std::copy(tokens.begin(), tokens.end(), x.data());
  std::copy(padded.begin(), padded.end(), y.data());
  const Tensor a = short_model->forward(x, false).clone();
  const Tensor& b = long_model->forward(y, false);
  ASSERT_EQ(b.shape(), (Shape{1, 2}));
  EXPECT_FLOAT_EQ(a.data()[0], b.data()[0]);
  EXPECT_FLOAT_EQ(a.data()[1], b.data()[1]);
}

TEST(InputLengths, EveryWayTheDataCannotGiveTheLengthsIsNamed) {
  // No data: the dimension and where it is declared.
  EXPECT_NE(build_error(lstm_of_any_length(), {})
                .find("config error at 'model.config.layers[0].config': model 'seq' takes "
                      "samples (None, None, 3), a length left null (any length, in Keras): "
                      "Tandem builds a model for the lengths of its data, and no data gives them "
                      "here"),
            std::string::npos)
      << build_error(lstm_of_any_length(), {});
  // Samples of another rank, or another size where the config fixes one.
  for (const Shape& bad : {Shape{7}, Shape{7, 3, 1}, Shape{7, 4}})
    EXPECT_NE(build_error(lstm_of_any_length(), data({bad}))
                  .find("the data's samples have shape " + shape_to_string(bad, true) +
                        " but model 'seq' takes (None, None, 3) (model.config.layers[0].config), "
                        "whose null lengths Tandem takes from the data"),
              std::string::npos)
        << build_error(lstm_of_any_length(), data({bad}));
  // Two inputs given as one packed array: which length is which cannot be told.
  const json two_inputs = {
      {"class_name", "Functional"},
      {"config",
       {{"name", "two"},
        {"layers",
         {{{"class_name", "InputLayer"},
           {"name", "a"},
           {"config", {{"name", "a"}, {"batch_shape", {nullptr, nullptr, 2}}}},
           {"inbound_nodes", json::array()}},
          {{"class_name", "InputLayer"},
           {"name", "b"},
           {"config", {{"name", "b"}, {"batch_shape", {nullptr, 2}}}},
           {"inbound_nodes", json::array()}},
          {{"class_name", "GlobalMaxPooling1D"},
           {"name", "pool"},
           {"config", {{"name", "pool"}}},
           {"inbound_nodes", test::keras2_calls({{json{"a_dense", 0, 0, json::object()}}})}},
          {{"class_name", "Dense"},
           {"name", "a_dense"},
           {"config", {{"name", "a_dense"}, {"units", 3}}},
           {"inbound_nodes", test::keras2_calls({{json{"a", 0, 0, json::object()}}})}},
          {{"class_name", "Dense"},
           {"name", "b_dense"},
           {"config", {{"name", "b_dense"}, {"units", 3}}},
           {"inbound_nodes", test::keras2_calls({{json{"b", 0, 0, json::object()}}})}},
          {{"class_name", "Add"},
           {"name", "add"},
           {"config", {{"name", "add"}}},
           {"inbound_nodes", test::keras2_calls({{json{"pool", 0, 0, json::object()},
                                                  json{"b_dense", 0, 0, json::object()}}})}}}},
        {"input_layers", {{"a", 0, 0}, {"b", 0, 0}}},
        {"output_layers", {{"add", 0, 0}}}}}};
  EXPECT_NE(build_error(two_inputs, data({{14}}))
                .find("the data gives 1 input array for the 2 inputs of model 'two', so the "
                      "lengths input 'a' of model 'two' leaves null "
                      "(model.config.layers[0].config) cannot be taken from it; give one array "
                      "per input"),
            std::string::npos)
      << build_error(two_inputs, data({{14}}));
  auto model = Model::from_config(two_inputs, "model", 0, data({{6, 2}, {2}}));
  EXPECT_EQ(model->input_shape(0), (Shape{6, 2}));
  EXPECT_EQ(model->input_shape(1), (Shape{2}));
  EXPECT_EQ(model->output_shape(0), (Shape{3}));
}

TEST(InputLengths, ANestedModelOfAnyLengthTakesTheLengthItIsGiven) {
  // A fixed input (6, 3) through a nested Sequential whose InputLayer takes (None, 3); one that
  // takes (None, 4) is refused naming both.
  const auto outer = [](int features) {
    const json inner = {
        {"class_name", "Sequential"},
        {"config",
         {{"name", "inner"},
          {"layers",
           {layer("InputLayer",
                  {{"name", "inner_in"}, {"batch_shape", {nullptr, nullptr, features}}}),
            layer("Conv1D", {{"name", "conv"}, {"filters", 2}, {"kernel_size", 3}})}}}},
        {"name", "inner"},
        {"inbound_nodes", test::keras2_calls({{json{"x", 0, 0, json::object()}}})}};
    return json{{"class_name", "Functional"},
                {"config",
                 {{"name", "outer"},
                  {"layers",
                   {{{"class_name", "InputLayer"},
                     {"name", "x"},
                     {"config", {{"name", "x"}, {"batch_shape", {nullptr, 6, 3}}}},
                     {"inbound_nodes", json::array()}},
                    inner}},
                  {"input_layers", {{"x", 0, 0}}},
                  {"output_layers", {{"inner", 1, 0}}}}}};
  };
  auto model = Model::from_config(outer(3), "model", 0);
  EXPECT_EQ(model->output_shape(0), (Shape{4, 2}));
  EXPECT_NE(test::model_config_error(outer(4)).find("where its InputLayer"), std::string::npos)
      << test::model_config_error(outer(4));
  EXPECT_NE(test::model_config_error(outer(4)).find("takes (None, 4)"), std::string::npos)
      << test::model_config_error(outer(4));
}

TEST(InputLengths, DeclaredShapesFitTheirData) {
  EXPECT_TRUE(nn::has_any_length({kAnyLength, 3}));
  EXPECT_FALSE(nn::has_any_length({5, 3}));
  EXPECT_TRUE(nn::fits_declared({5, 3}, {kAnyLength, 3}));
  EXPECT_FALSE(nn::fits_declared({5, 4}, {kAnyLength, 3}));
  EXPECT_FALSE(nn::fits_declared({5}, {kAnyLength, 3}));
  EXPECT_EQ(nn::with_data_lengths({kAnyLength, kAnyLength, 3}, {4, 5, 3}, "x", "p"),
            (Shape{4, 5, 3}));
  EXPECT_THROW(nn::with_data_lengths({kAnyLength, 3}, {4, 5, 3}, "x", "p"), ShapeError);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
