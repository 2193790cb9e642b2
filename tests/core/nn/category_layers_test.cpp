// Discretization and CategoryEncoding (Keras' numeric preprocessing into categories): bins and
// encodings by hand (NumPy's digitize; Keras' encode_categorical_inputs reducing over the
// sample's first axis), no gradient to the input, bad categories and configs refused at their
// place, configs written back as Keras writes them. (LayerOracle compares both with PyTorch.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// Sequential([Input(shape), layer]).
std::unique_ptr<Model> one_layer(const Shape& shape, const std::string& cls, json config) {
  json input_shape = json::array({nullptr});
  for (auto d : shape) input_shape.push_back(d);
  config["name"] = "layer";
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "m"},
        {"layers", json::array({{{"class_name", "InputLayer"},
                                 {"config", {{"name", "x"}, {"batch_input_shape", input_shape}}}},
                                {{"class_name", cls}, {"config", config}}})}}}};
  return Model::from_config(model, "model", 1);
}

std::vector<float> run(Model& model, const Shape& shape, const std::vector<float>& values) {
  Shape batch{static_cast<std::int64_t>(values.size()) / shape_size(shape)};
  batch.insert(batch.end(), shape.begin(), shape.end());
  const Tensor& y = model.forward(Tensor::from_vector(batch, values), false);
  return std::vector<float>(y.data(), y.data() + y.size());
}

std::string config_error(const Shape& shape, const std::string& cls, const json& config) {
  try {
    one_layer(shape, cls, config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Discretization, BinsAsNumPysDigitize) {
  // digitize(x, [0, 1, 2.5]): below 0 -> 0, [0, 1) -> 1, [1, 2.5) -> 2, from 2.5 on -> 3.
  auto model = one_layer({4}, "Discretization", {{"bin_boundaries", {0.0, 1.0, 2.5}}});
  EXPECT_EQ(model->output_shape(), (Shape{4}));
  EXPECT_EQ(run(*model, {4}, {-1.0f, 0.0f, 0.5f, 1.0f, 2.4999f, 2.5f, 3.0f, -0.0f}),
            (std::vector<float>{0, 1, 1, 2, 2, 3, 3, 1}));
  // Equal boundaries make an empty bin; none at all, one bin.
  auto equal = one_layer({3}, "Discretization", {{"bin_boundaries", {1.0, 1.0}}});
  EXPECT_EQ(run(*equal, {3}, {0.5f, 1.0f, 7.0f}), (std::vector<float>{0, 2, 2}));
  auto none = one_layer({2}, "Discretization", {{"bin_boundaries", json::array()}});
  EXPECT_EQ(run(*none, {2}, {-5.0f, 5.0f}), (std::vector<float>{0, 0}));
}

TEST(Discretization, OtherModesEncodeTheBins) {
  const json b = {-1.0, 1.0};  // 3 bins
  auto one_hot =
      one_layer({2, 1}, "Discretization", {{"bin_boundaries", b}, {"output_mode", "one_hot"}});
  EXPECT_EQ(one_hot->output_shape(), (Shape{2, 3}));  // the last axis of 1 replaced
  EXPECT_EQ(run(*one_hot, {2, 1}, {-2.0f, 5.0f}), (std::vector<float>{1, 0, 0, 0, 0, 1}));
  auto multi =
      one_layer({3}, "Discretization", {{"bin_boundaries", b}, {"output_mode", "multi_hot"}});
  EXPECT_EQ(multi->output_shape(), (Shape{3}));
  EXPECT_EQ(run(*multi, {3}, {0.0f, 0.5f, 9.0f, -3.0f, -2.0f, -1.5f}),
            (std::vector<float>{0, 1, 1, 1, 0, 0}));
  auto count = one_layer({3}, "Discretization", {{"bin_boundaries", b}, {"output_mode", "count"}});
  EXPECT_EQ(run(*count, {3}, {0.0f, 0.5f, 9.0f, -3.0f, -2.0f, -1.5f}),
            (std::vector<float>{0, 2, 1, 3, 0, 0}));
}

TEST(CategoryEncoding, EncodesAsKerasOverTheSamplesFirstAxis) {
  auto multi = one_layer({3}, "CategoryEncoding", {{"num_tokens", 4}});  // multi_hot by default
  EXPECT_EQ(multi->output_shape(), (Shape{4}));
  EXPECT_EQ(run(*multi, {3}, {0, 2, 2, 3, 3, 3}), (std::vector<float>{1, 0, 1, 0, 0, 0, 0, 1}));
  auto count = one_layer({3}, "CategoryEncoding", {{"num_tokens", 4}, {"output_mode", "count"}});
  EXPECT_EQ(run(*count, {3}, {0, 2, 2, 3, 3, 3}), (std::vector<float>{1, 0, 2, 0, 0, 0, 0, 3}));
  // A sample of (2, 3): Keras reduces over the batch tensor's axis 1, leaving (3, tokens).
  auto grid = one_layer({2, 3}, "CategoryEncoding", {{"num_tokens", 2}, {"output_mode", "count"}});
  EXPECT_EQ(grid->output_shape(), (Shape{3, 2}));
  EXPECT_EQ(run(*grid, {2, 3}, {0, 1, 1, 0, 0, 1}), (std::vector<float>{2, 0, 1, 1, 0, 2}));
  // one_hot: a vector per index.
  auto one_hot =
      one_layer({2}, "CategoryEncoding", {{"num_tokens", 3}, {"output_mode", "one_hot"}});
  EXPECT_EQ(one_hot->output_shape(), (Shape{2, 3}));
  EXPECT_EQ(run(*one_hot, {2}, {2, 0}), (std::vector<float>{0, 0, 1, 1, 0, 0}));
}

TEST(CategoryEncoding, ABadCategoryIsADataErrorNamingTheSample) {
  auto model = one_layer({2, 2}, "CategoryEncoding", {{"num_tokens", 4}});
  const auto error = [&](float bad) {
    try {
      run(*model, {2, 2}, {0, 1, 2, 3, 1, 1, bad, 0});
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error(4).find("layer 'layer' (CategoryEncoding): input[1, 1, 0] = 4 is a category "
                          "outside [0, 4)"),
            std::string::npos)
      << error(4);
  EXPECT_NE(error(-1).find("input[1, 1, 0] = -1 is a category outside [0, 4)"), std::string::npos)
      << error(-1);
  EXPECT_NE(error(1.5f).find("input[1, 1, 0] = 1.5 is not an integer category"), std::string::npos)
      << error(1.5f);
  EXPECT_NE(error(NAN).find("is not an integer category"), std::string::npos) << error(NAN);
}

TEST(CategoryLayers, NoGradientReachesTheInput) {
  // Dense -> Discretization -> Dense: the first Dense gets zeros, as Keras' integer outputs
  // give it no gradient; the last trains.
  const json model = json::parse(R"({"class_name": "Sequential", "config": {"name": "m",
    "layers": [{"class_name": "Dense", "config": {"name": "a", "units": 3, "input_shape": [2]}},
     {"class_name": "Discretization", "config": {"name": "d", "bin_boundaries": [0.0]}},
     {"class_name": "Dense", "config": {"name": "b", "units": 1}}]}})");
  auto m = Model::from_config(model, "model", 1);
  m->forward(test::random_tensor({4, 2}, 3), true);
  m->backward(test::random_tensor({4, 1}, 4));
  const auto params = m->parameters();
  for (std::int64_t i = 0; i < params[0]->grad.size(); ++i) EXPECT_EQ(params[0]->grad[i], 0.0f);
  double last = 0;
  for (std::int64_t i = 0; i < params[2]->grad.size(); ++i) last += std::fabs(params[2]->grad[i]);
  EXPECT_GT(last, 0.0);
}

TEST(CategoryLayers, ConfigsReadBackAndBadOnesAreRefusedAtTheirPlace) {
  auto d = one_layer({2}, "Discretization",
                     {{"bin_boundaries", {0.5, 2.0}},
                      {"num_bins", 3},
                      {"output_mode", "count"},
                      {"epsilon", 0.01},
                      {"sparse", false},
                      {"dtype", "float32"}});
  const json written = d->config()["config"]["layers"][1]["config"];
  EXPECT_EQ(written["bin_boundaries"], json({0.5, 2.0}));
  EXPECT_EQ(written["num_bins"], 3);
  EXPECT_EQ(written["output_mode"], "count");
  EXPECT_NO_THROW(Model::from_config(d->config(), "model", 1));
  auto c = one_layer({2}, "CategoryEncoding", {{"num_tokens", 5}, {"output_mode", "one_hot"}});
  EXPECT_NO_THROW(Model::from_config(c->config(), "model", 1));

  EXPECT_NE(config_error({2}, "Discretization", {{"num_bins", 4}})
                .find("'model.config.layers[1].config.bin_boundaries': null: the boundaries are "
                      "Keras' adapt()'s to compute (num_bins 4)"),
            std::string::npos);
  EXPECT_NE(config_error({2}, "Discretization", {{"bin_boundaries", {1.0, 0.5}}})
                .find("bin_boundaries[1]': 0.5 is below the boundary before it"),
            std::string::npos);
  EXPECT_NE(config_error({2}, "Discretization", {{"bin_boundaries", {1.0, "x"}}})
                .find("bin_boundaries[1]': expected a finite number"),
            std::string::npos);
  EXPECT_NE(config_error({2}, "Discretization", {{"bin_boundaries", {1.0}}, {"num_bins", 5}})
                .find("'model.config.layers[1].config.num_bins': 5 bins, but 1 bin_boundaries "
                      "make 2"),
            std::string::npos);
  EXPECT_NE(
      config_error({2}, "Discretization", {{"bin_boundaries", {1.0}}, {"output_mode", "tf_idf"}})
          .find("config.output_mode"),
      std::string::npos);
  EXPECT_NE(config_error({2}, "CategoryEncoding", {{"num_tokens", 3}, {"sparse", true}})
                .find("config.sparse': Tandem's tensors are dense"),
            std::string::npos);
  EXPECT_NE(config_error({2}, "CategoryEncoding", json::object())
                .find("config.num_tokens': required key is missing"),
            std::string::npos);
  EXPECT_NE(config_error({2}, "CategoryEncoding", {{"num_tokens", 3}, {"output_mode", "int"}})
                .find("config.output_mode"),
            std::string::npos);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
