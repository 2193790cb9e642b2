// TimeDistributed (nn/time_distributed.hpp): the wrapped layer's weights are the wrapper's, named
// as Keras 2 and 3 keep them; a random layer wrapped draws per step of each sample wherever the
// sample sits in the batch (contract 1); a mask passes through to a recurrent layer after it;
// configs read back, and what Tandem does not compute as Keras does is refused at its key.
// (LayerOracle.TimeDistributedMatchesPyTorch checks outputs and gradients against torch.)
#include "nn/time_distributed.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "nn/keras3_weight_paths.hpp"
#include "nn/layer_registry.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json wrapping(const char* cls, json config) {
  return {{"layer", {{"class_name", cls}, {"config", config}}}};
}

std::unique_ptr<Layer> make(json config) {
  config["name"] = "time_distributed";
  return test::make_layer("TimeDistributed", config);
}

std::string config_error(json config) {
  config["name"] = "time_distributed";
  return test::layer_config_error("TimeDistributed", config);
}

json sequential(std::vector<json> layers) {
  return {{"class_name", "Sequential"}, {"config", {{"name", "m"}, {"layers", layers}}}};
}

json layer(const char* cls, json config) {
  return {{"class_name", cls}, {"config", config}};
}

TEST(TimeDistributed, ItsWeightsAreTheWrappedLayersUnderKerasNames) {
  auto model = Model::from_config(
      sequential({layer("InputLayer", {{"batch_input_shape", {nullptr, 4, 3}}}),
                  layer("TimeDistributed", wrapping("Dense", {{"name", "dense"}, {"units", 2}}))}),
      "model", 1);
  EXPECT_EQ(model->parameter_names(),
            (std::vector<std::string>{"time_distributed/kernel", "time_distributed/bias"}));
  EXPECT_EQ(model->output_shape(0), (Shape{4, 2}));
  auto& wrapper = dynamic_cast<nn::TimeDistributed&>(model->layer(0));
  EXPECT_EQ(nn::keras3_weight_names(wrapper, {"kernel", "bias"}),
            (std::vector<std::string>{"layer/0", "layer/1"}));
  auto lstm = make(wrapping("LSTM", {{"name", "lstm"}, {"units", 2}}));
  std::vector<std::string> names;
  for (Parameter* p : lstm->parameters()) names.push_back(p->name);
  EXPECT_EQ(nn::keras3_weight_names(*lstm, names),
            (std::vector<std::string>{"layer/cell/0", "layer/cell/1", "layer/cell/2"}));
}

// A Dropout wrapped draws for each step of each sample, keyed by the sample's place in the global
// batch: rows 2 and 3 alone, told where they sit, drop what the whole batch drops there.
TEST(TimeDistributed, AWrappedDropoutDrawsPerStepWhereverTheSampleSits) {
  const json config = wrapping("Dropout", {{"name", "drop"}, {"rate", 0.5}, {"seed", 3}});
  auto whole = make(config), part = make(config);
  Rng init(1);
  whole->build({5, 6}, init);
  part->build({5, 6}, init);
  Tensor x({4, 5, 6});
  x.fill(1.0f);
  const Tensor all = whole->forward(x, true).clone();
  Tensor two({2, 5, 6});
  two.fill(1.0f);
  part->set_sample_offset(2);
  const Tensor& tail = part->forward(two, true);
  for (std::int64_t i = 0; i < tail.size(); ++i) ASSERT_EQ(tail[i], all[60 + i]) << i;
  // Each step of a sample has its own draws.
  int differing = 0;
  for (std::int64_t f = 0; f < 6; ++f) differing += all[f] != all[6 + f];
  EXPECT_GT(differing, 0);
}

TEST(TimeDistributed, GradientsOfAWrappedConvolutionMatchCentralDifferences) {
  auto layer = make(wrapping(
      "Conv2D", {{"name", "conv"}, {"filters", 2}, {"kernel_size", 2}, {"activation", "tanh"}}));
  Rng init(4);
  EXPECT_EQ(layer->build({3, 3, 3, 2}, init), (Shape{3, 2, 2, 2}));
  Tensor x = test::random_tensor({2, 3, 3, 3, 2}, 5);
  const Tensor y = layer->forward(x, false).clone();
  const Tensor dy = test::random_tensor(y.shape(), 6);
  const Tensor dx = layer->backward(dy, true).clone();
  const auto loss = [&] {
    const Tensor& out = layer->forward(x, false);
    double s = 0;
    for (std::int64_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * dy[i];
    return s;
  };
  const auto numeric = [&](Tensor& t, std::int64_t i) {
    const float saved = t[i];
    t[i] = saved + 1e-2f;
    const double up = loss();
    t[i] = saved - 1e-2f;
    const double down = loss();
    t[i] = saved;
    return (up - down) / 2e-2;
  };
  for (std::int64_t i = 0; i < x.size(); i += 5)
    EXPECT_NEAR(dx[i], numeric(x, i), 2e-3 * (1 + std::fabs(dx[i]))) << "dx[" << i << "]";
  Parameter& kernel = *layer->parameters()[0];
  const Tensor grad = kernel.grad.clone();
  for (std::int64_t i = 0; i < kernel.value.size(); ++i)
    EXPECT_NEAR(grad[i], numeric(kernel.value, i), 2e-3 * (1 + std::fabs(grad[i]))) << i;
}

// Embedding(mask_zero) -> TimeDistributed(Dense) -> LSTM: the mask passes the wrapper, so the
// padded steps are skipped as if cut out.
TEST(TimeDistributed, AMaskPassesThroughToTheLayersAfterIt) {
  const auto model = [](int steps) {
    return sequential(
        {layer("InputLayer", {{"batch_input_shape", {nullptr, steps}}}),
         layer("Embedding",
               {{"name", "emb"}, {"input_dim", 9}, {"output_dim", 4}, {"mask_zero", true}}),
         layer("TimeDistributed", wrapping("Dense", {{"name", "dense"}, {"units", 3}})),
         layer("LSTM", {{"name", "rnn"}, {"units", 2}})});
  };
  auto padded = Model::from_config(model(5), "model", 1);
  auto cut = Model::from_config(model(2), "model", 2);
  cut->copy_weights_from(*padded);
  const Tensor& a = padded->forward(Tensor::from_vector({1, 5}, {3, 0, 7, 0, 0}), false);
  const std::vector<float> got(a.data(), a.data() + a.size());
  const Tensor& b = cut->forward(Tensor::from_vector({1, 2}, {3, 7}), false);
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], b[static_cast<std::int64_t>(i)], 1e-6);
}

TEST(TimeDistributed, ConfigsReadBackAndBadOnesAreRefusedAtTheirPlace) {
  // Keras 3 writes the wrapped layer as a serialized object.
  json keras3 = wrapping("Conv2D", {{"name", "conv"}, {"filters", 2}, {"kernel_size", 3}});
  keras3["layer"]["module"] = "keras.layers";
  keras3["layer"]["registered_name"] = nullptr;
  const json written = make(keras3)->config();
  EXPECT_EQ(written["layer"]["class_name"], "Conv2D");
  EXPECT_EQ(written["layer"]["config"]["name"], "conv");
  EXPECT_EQ(make(written)->config(), written);  // read back to itself

  const std::vector<std::pair<json, std::string>> bad{
      {json::object(), "'layer.config.layer'"},
      {wrapping("NoSuchLayer", json::object()),
       "'layer.config.layer.class_name': unknown layer class 'NoSuchLayer'"},
      {wrapping("BatchNormalization", json::object()),
       "'layer.config.layer.class_name': TimeDistributed of a BatchNormalization is not "
       "supported"},
      {wrapping("Concatenate", json::object()),
       "'layer.config.layer.class_name': TimeDistributed wraps a layer of one input"},
      {wrapping("Sequential", {{"layers", json::array()}}),
       "'layer.config.layer.class_name': TimeDistributed of a whole model"},
      {wrapping("Dense", {{"units", 0}}), "'layer.config.layer.config.units'"},
      {wrapping("Dense", {{"units", 2}, {"activity_regularizer", "l2"}}),
       "'layer.config.layer.config.activity_regularizer'"},
      {wrapping("Dense", {{"units", 2}, {"unknown_key", 1}}),
       "'layer.config.layer.config.unknown_key'"},
  };
  for (const auto& [config, message] : bad)
    EXPECT_NE(config_error(config).find(message), std::string::npos)
        << config.dump() << ": " << config_error(config);
  Rng init(1);
  EXPECT_THROW(make(wrapping("Dense", {{"units", 2}}))->build({4}, init), ShapeError);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
