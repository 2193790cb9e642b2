// Keras 3's places for a model's weights (nn/keras3_weight_paths.hpp) and Model::load_weights
// pairing a Keras 3 file by them: group names against Keras' own to_snake_case (its regular
// expressions, run by Python) and against names worked out by hand from Keras' saving_lib
// (_save_container_state numbers a class's layers in model.layers order; a Sequential model's
// InputLayer is not among them); layers named so that pairing by name would swap them.
#include "nn/keras3_weight_paths.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// keras/src/utils/naming.py's to_snake_case, as Keras 3 has it.
constexpr const char* kKerasSnakeCase = R"PY(
import re, sys
def to_snake_case(name):
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    name = re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()
    return name
for name in sys.argv[1:]:
    print(to_snake_case(name))
)PY";

TEST(Keras3WeightPaths, GroupNamesAreKerasSnakeCaseOfTheClass) {
  const std::vector<std::string> classes{"Dense",
                                         "Conv2D",
                                         "Conv2DTranspose",
                                         "DepthwiseConv2D",
                                         "SeparableConv2D",
                                         "PReLU",
                                         "ELU",
                                         "ReLU",
                                         "LeakyReLU",
                                         "MultiHeadAttention",
                                         "LayerNormalization",
                                         "BatchNormalization",
                                         "GlobalAveragePooling1D",
                                         "GlobalMaxPooling2D",
                                         "MaxPooling1D",
                                         "UpSampling2D",
                                         "ZeroPadding2D",
                                         "SpatialDropout2D",
                                         "InputLayer",
                                         "PositionEmbedding",
                                         "Conv1D",
                                         "Conv3D",
                                         "Conv3DTranspose",
                                         "ConvLSTM2D",
                                         "RMSNormalization",
                                         "GroupedQueryAttention",
                                         "MaxPooling3D",
                                         "GlobalAveragePooling3D",
                                         "ZeroPadding3D",
                                         "UpSampling3D",
                                         "ABCdef",
                                         "aB",
                                         "HTTPServer2Go",
                                         "x_Y"};
  std::string args;
  for (const auto& c : classes) args += " " + c;
  auto r = test::run_python(test::scratch_dir("keras3-snake") / "snake.py", kKerasSnakeCase, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream keras(r.out);
  for (const auto& c : classes) {
    std::string expected;
    std::getline(keras, expected);
    EXPECT_EQ(nn::keras_snake_case(c), expected) << c;
  }
  EXPECT_EQ(nn::keras_snake_case("Conv2DTranspose"), "conv2d_transpose");
  EXPECT_EQ(nn::keras_snake_case("PReLU"), "p_re_lu");
  EXPECT_EQ(nn::keras_snake_case("GlobalAveragePooling1D"), "global_average_pooling1d");
}

TEST(Keras3WeightPaths, EachClassIsNumberedByItsPlaceAmongTheModelsLayersOfThatClass) {
  EXPECT_EQ(nn::keras3_layer_groups({"InputLayer", "Dense", "Dense", "Conv2D", "Dense", "Conv2D"}),
            (std::vector<std::string>{"input_layer", "dense", "dense_1", "conv2d", "dense_2",
                                      "conv2d_1"}));
  EXPECT_EQ(nn::keras3_weight_names("Dense", {"kernel", "bias"}),
            (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(nn::keras3_weight_names("BatchNormalization",
                                    {"gamma", "beta", "moving_mean", "moving_variance"}),
            (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(nn::keras3_weight_names(
                "MultiHeadAttention",
                {"query/kernel", "query/bias", "key/kernel", "key/bias", "value/kernel",
                 "value/bias", "attention_output/kernel", "attention_output/bias"}),
            (std::vector<std::string>{"query_dense/0", "query_dense/1", "key_dense/0",
                                      "key_dense/1", "value_dense/0", "value_dense/1",
                                      "output_dense/0", "output_dense/1"}));
  // GroupedQueryAttention keeps its EinsumDense sublayers under the same attributes.
  EXPECT_EQ(
      nn::keras3_weight_names("GroupedQueryAttention", {"query/kernel", "key/kernel",
                                                        "value/kernel", "attention_output/kernel"}),
      (std::vector<std::string>{"query_dense/0", "key_dense/0", "value_dense/0",
                                "output_dense/0"}));
  // A convolutional LSTM keeps its cell's weights under `cell`, as LSTM does.
  EXPECT_EQ(nn::keras3_weight_names("ConvLSTM2D", {"conv_lstm_cell/kernel",
                                                   "conv_lstm_cell/recurrent_kernel",
                                                   "conv_lstm_cell/bias"}),
            (std::vector<std::string>{"cell/0", "cell/1", "cell/2"}));
  // So does an RNN over a cell, whatever the cell's name.
  EXPECT_EQ(nn::keras3_weight_names(
                "RNN", {"lstm_cell_3/kernel", "lstm_cell_3/recurrent_kernel", "lstm_cell_3/bias"}),
            (std::vector<std::string>{"cell/0", "cell/1", "cell/2"}));
  EXPECT_EQ(nn::keras3_private_spelling("query_dense/0"), "_query_dense/0");
  EXPECT_EQ(nn::keras3_private_spelling("0"), "");
}

// x (4) -> "b" Dense 3 -> "a" Dense 3 -> "dense" Dense 2: Keras 3 keeps them in dense, dense_1
// and dense_2, whatever their names (a pairing by name would put "dense"'s weights in "b").
const json kSequential = json::parse(R"({"class_name": "Sequential", "config": {"name": "s",
  "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
             {"class_name": "Dense", "config": {"name": "b", "units": 3}},
             {"class_name": "Dense", "config": {"name": "a", "units": 3}},
             {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})");

Tensor filled(Shape shape, float first) {
  Tensor t(std::move(shape));
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = first + static_cast<float>(i);
  return t;
}

CheckpointData keras3_file() {
  CheckpointData data;
  data.layout = WeightsLayout::keras3;
  data.layers = {{"dense_2", {{"0", filled({3, 2}, 300)}, {"1", filled({2}, 310)}}},
                 {"dense", {{"0", filled({4, 3}, 100)}, {"1", filled({3}, 110)}}},
                 {"dense_1", {{"0", filled({3, 3}, 200)}, {"1", filled({3}, 210)}}}};
  return data;
}

std::string load_error(const CheckpointData& data) {
  auto model = Model::from_config(kSequential, "model", 1);
  try {
    model->load_weights(data, "w.weights.h5");
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Keras3WeightPaths, ASequentialModelTakesItsGroupsByClassAndPlaceNotByName) {
  auto model = Model::from_config(kSequential, "model", 1);
  EXPECT_EQ(model->load_weights(keras3_file(), "w.weights.h5"), "");
  EXPECT_EQ(model->layer(0).name(), "b");
  EXPECT_EQ(model->layer(0).parameters()[0]->value[0], 100.0f);
  EXPECT_EQ(model->layer(0).parameters()[1]->value[2], 112.0f);
  EXPECT_EQ(model->layer(1).parameters()[0]->value[8], 208.0f);
  EXPECT_EQ(model->layer(2).name(), "dense");
  EXPECT_EQ(model->layer(2).parameters()[0]->value[0], 300.0f);
  EXPECT_EQ(model->layer(2).parameters()[1]->value[1], 311.0f);
}

TEST(Keras3WeightPaths, AFileThatDoesNotFitTheModelIsRefusedNamingTheGroup) {
  CheckpointData missing = keras3_file();
  missing.layers.erase(missing.layers.begin() + 2);
  EXPECT_NE(load_error(missing).find("w.weights.h5: has no weights for layer 'a' (Dense), which "
                                     "Keras 3 keeps in /layers/dense_1"),
            std::string::npos)
      << load_error(missing);

  CheckpointData extra = keras3_file();
  extra.layers.push_back({"dense_3", {{"0", filled({2, 2}, 0)}}});
  EXPECT_NE(load_error(extra).find("/layers/dense_3 holds weights, but model 's' has no layer "
                                   "Keras 3 would keep there"),
            std::string::npos)
      << load_error(extra);
  // A group without weights (an InputLayer's, a Dropout's) is no layer's to take.
  CheckpointData empty = keras3_file();
  empty.layers.push_back({"dropout", {}});
  EXPECT_EQ(load_error(empty), "(no error)");

  CheckpointData three = keras3_file();
  three.layers[1].weights.push_back({"2", filled({3}, 0)});
  EXPECT_NE(load_error(three).find("/layers/dense holds 3 weights, but layer 'b' (Dense) has 2"),
            std::string::npos)
      << load_error(three);

  CheckpointData renamed = keras3_file();
  renamed.layers[1].weights[1].name = "7";
  EXPECT_NE(load_error(renamed).find("/layers/dense has no vars/1, which layer 'b'"),
            std::string::npos)
      << load_error(renamed);

  CheckpointData shape = keras3_file();
  shape.layers[2].weights[0].value = filled({3, 4}, 0);
  EXPECT_NE(load_error(shape).find("weight '/layers/dense_1/vars/0' has shape (3, 4), model "
                                   "expects (3, 3) for 'a/kernel'"),
            std::string::npos)
      << load_error(shape);
}

// A functional model: its InputLayer is among model.layers (its own group, no weights), and a
// MultiHeadAttention's weights are under its sublayers' attributes — in Keras 3.0's first
// releases the private ones (_query_dense), read too.
TEST(Keras3WeightPaths, AttentionWeightsAreUnderTheSublayerAttributesEitherSpelling) {
  const json tensor = json::parse(R"({"class_name": "__keras_tensor__", "config": {"shape": null,
      "dtype": "float32", "keras_history": ["x", 0, 0]}})");
  json config = json::parse(R"({"class_name": "Functional", "config": {"name": "f", "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_shape": [null, 4, 8],
       "name": "x"}, "inbound_nodes": []},
      {"class_name": "MultiHeadAttention", "name": "att", "config": {"name": "att",
       "num_heads": 2, "key_dim": 4}, "inbound_nodes": []}],
      "input_layers": [["x", 0, 0]], "output_layers": [["att", 0, 0]]}})");
  config["config"]["layers"][1]["inbound_nodes"] =
      json::array({{{"args", {tensor, tensor}}, {"kwargs", json::object()}}});
  for (const std::string prefix : {"", "_"}) {
    SCOPED_TRACE(prefix);
    auto model = Model::from_config(config, "model", 1);
    CheckpointData data;
    data.layout = WeightsLayout::keras3;
    LayerWeights att{"multi_head_attention", {}};
    float first = 0;
    for (const char* sub : {"query_dense", "key_dense", "value_dense", "output_dense"}) {
      const bool output = std::string(sub) == "output_dense";
      att.weights.push_back(
          {prefix + sub + "/0", filled(output ? Shape{2, 4, 8} : Shape{8, 2, 4}, first += 1000)});
      att.weights.push_back(
          {prefix + sub + "/1", filled(output ? Shape{8} : Shape{2, 4}, first + 500)});
    }
    data.layers = {{"input_layer", {}}, att};
    ASSERT_EQ(model->load_weights(data, "f.weights.h5"), "");
    const auto params = model->layer(0).parameters();
    ASSERT_EQ(params.size(), 8u);
    EXPECT_EQ(params[0]->name, "query/kernel");
    EXPECT_EQ(params[0]->value[0], 1000.0f);
    EXPECT_EQ(params[3]->value[0], 2500.0f);  // key/bias
    EXPECT_EQ(params[6]->name, "attention_output/kernel");
    EXPECT_EQ(params[6]->value[1], 4001.0f);
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
