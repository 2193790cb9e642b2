// SimpleRNN, LSTM and GRU beyond what LayerOracle compares with PyTorch (inference forwards and
// their gradients): the training forward's dropout masks (the gradient by central differences
// with the same masks drawn again; inference untouched by them), an empty shard, LSTM's
// unit_forget_bias, configs written back as Keras reads them, and bad configs refused at their
// place.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "nn/layer_registry.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "util/config_object.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::unique_ptr<Layer> make(const std::string& cls, json config) {
  config["name"] = "rnn";
  return test::make_layer(cls, config);
}

std::string config_error(const std::string& cls, json config) {
  config["name"] = "rnn";
  return test::layer_config_error(cls, config);
}

// The training gradients through the dropout masks (test::expect_training_gradients).
void check_training_gradient(const std::string& cls, const json& config) {
  SCOPED_TRACE(cls + " " + config.dump());
  auto layer = make(cls, config);
  Rng init(3);
  layer->build({5, 3}, init);
  Tensor x = test::random_tensor({4, 5, 3}, 11);
  test::expect_training_gradients(*layer, x, 12);
}

TEST(Recurrent, TrainingGradientsThroughDropoutMasksMatchCentralDifferences) {
  const json dropouts = {{"units", 4}, {"dropout", 0.3}, {"recurrent_dropout", 0.3}};
  json sequences = dropouts;
  sequences["return_sequences"] = true;
  json backwards = dropouts;
  backwards["go_backwards"] = true;
  check_training_gradient("LSTM", sequences);
  check_training_gradient("GRU", backwards);
  check_training_gradient("SimpleRNN", sequences);
  json reset_before = sequences;
  reset_before["reset_after"] = false;
  check_training_gradient("GRU", reset_before);
}

// A GRU with reset_after false (Keras 2.2's default): one bias of 3 units, its config read back;
// its recurrent dropout enters the reset gate's product too (the gradient check above).
TEST(Recurrent, AGruWithTheResetGateBeforeItsProductHasOneBias) {
  auto layer = make("GRU", {{"units", 4}, {"reset_after", false}});
  Rng init(2);
  layer->build({5, 3}, init);
  const auto params = layer->parameters();
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[2]->value.shape(), (Shape{12}));
  EXPECT_EQ(params[2]->name, "gru_cell/bias");
  const json written = layer->config();
  EXPECT_EQ(written["reset_after"], false);
  EXPECT_EQ(make("GRU", written)->config(), written);
  auto after = make("GRU", {{"units", 4}});
  after->build({5, 3}, init);
  EXPECT_EQ(after->parameters()[2]->value.shape(), (Shape{2, 12}));
  EXPECT_NE(config_error("LSTM", {{"units", 2}, {"reset_after", false}})
                .find("'layer.config.reset_after'"),
            std::string::npos);
}

TEST(Recurrent, DropoutMasksOnlyTrainingForwardsAndDrawAfreshEachStep) {
  auto layer = make("LSTM", {{"units", 3}, {"dropout", 0.5}, {"recurrent_dropout", 0.5}});
  Rng init(5);
  layer->build({4, 2}, init);
  const Tensor x = test::random_tensor({6, 4, 2}, 1);
  auto plain = make("LSTM", {{"units", 3}});
  Rng same_init(5);
  plain->build({4, 2}, same_init);
  const auto params = layer->parameters(), plain_params = plain->parameters();
  for (std::size_t p = 0; p < params.size(); ++p)
    plain_params[p]->value.copy_from(params[p]->value);
  const Tensor inference = layer->forward(x, false).clone();
  const Tensor reference = plain->forward(x, false);
  for (std::int64_t i = 0; i < inference.size(); ++i) EXPECT_EQ(inference[i], reference[i]);
  const Tensor first = layer->forward(x, true).clone();
  const Tensor second = layer->forward(x, true).clone();
  int differ_from_inference = 0, differ_between_steps = 0;
  for (std::int64_t i = 0; i < first.size(); ++i) {
    differ_from_inference += first[i] != inference[i];
    differ_between_steps += first[i] != second[i];
  }
  EXPECT_GT(differ_from_inference, first.size() / 2);
  EXPECT_GT(differ_between_steps, first.size() / 2);
}

TEST(Recurrent, AnEmptyShardGivesZeroGradients) {
  for (const char* cls : {"LSTM", "GRU", "SimpleRNN"}) {
    auto layer = make(cls, {{"units", 3}, {"return_sequences", true}});
    Rng init(2);
    layer->build({4, 2}, init);
    for (Parameter* p : layer->parameters()) p->grad.fill(7.0f);
    EXPECT_EQ(layer->forward(Tensor({0, 4, 2}), true).shape(), (Shape{0, 4, 3})) << cls;
    EXPECT_EQ(layer->backward(Tensor({0, 4, 3}), true).shape(), (Shape{0, 4, 2})) << cls;
    for (Parameter* p : layer->parameters())
      for (float g : p->grad.values()) EXPECT_EQ(g, 0.0f) << cls << " " << p->name;
  }
}

TEST(Recurrent, LstmsForgetGateBiasStartsAtOne) {
  auto layer = make("LSTM", {{"units", 3}, {"bias_initializer", "zeros"}});
  Rng init(1);
  layer->build({4, 2}, init);
  const Tensor& bias = layer->parameters()[2]->value;
  EXPECT_EQ(std::vector<float>(bias.data(), bias.data() + bias.size()),
            (std::vector<float>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
  auto without = make("LSTM", {{"units", 3}, {"unit_forget_bias", false}});
  without->build({4, 2}, init);
  for (float b : without->parameters()[2]->value.values()) EXPECT_EQ(b, 0.0f);
  auto gru = make("GRU", {{"units", 3}});
  gru->build({4, 2}, init);
  EXPECT_EQ(gru->parameters()[2]->value.shape(), (Shape{2, 9}));  // input and recurrent biases
}

TEST(Recurrent, ConfigsReadBackAndBadOnesAreRefusedAtTheirPlace) {
  const json full = {
      {"units", 5},
      {"activation", "relu"},
      {"recurrent_activation", "hard_sigmoid"},
      {"return_sequences", true},
      {"go_backwards", true},
      {"dropout", 0.25},
      {"recurrent_dropout", 0.5},
      {"seed", 9},
      {"unroll", true},
      {"implementation", 1},
      {"kernel_regularizer", {{"class_name", "L2"}, {"config", {{"l2", 0.1}}}}},
      {"recurrent_constraint", {{"class_name", "NonNeg"}, {"config", json::object()}}}};
  for (const char* cls : {"LSTM", "GRU"}) {
    const json written = make(cls, full)->config();
    EXPECT_EQ(written["recurrent_activation"], "hard_sigmoid") << cls;
    EXPECT_EQ(written["go_backwards"], true) << cls;
    EXPECT_EQ(written["recurrent_dropout"], 0.5) << cls;
    EXPECT_EQ(written["seed"], 9) << cls;
    EXPECT_EQ(make(cls, written)->config(), written) << cls;  // read back to itself
  }
  EXPECT_EQ(make("SimpleRNN", {{"units", 2}})->config().count("recurrent_activation"), 0u);
  EXPECT_EQ(make("LSTM", {{"units", 2}, {"activation", nullptr}})->config()["activation"],
            "linear");  // Keras' None

  const std::vector<std::pair<json, std::string>> bad{
      {{{"units", 2}, {"stateful", true}}, "'layer.config.stateful': states carried"},
      {{{"units", 2}, {"time_major", true}}, "'layer.config.time_major': Tandem reads sequences"},
      {{{"units", 2}, {"activation", "softmax"}},
       "'layer.config.activation': a recurrent cell needs an element-wise activation"},
      {{{"units", 0}}, "'layer.config.units'"},
      {{{"units", 2}, {"dropout", 1.0}}, "'layer.config.dropout'"},
      {{{"units", 2}, {"implementation", 3}}, "'layer.config.implementation'"},
      {{{"units", 2}, {"recurrent_initializer", "no_such"}},
       "'layer.config.recurrent_initializer'"},
      {{{"units", 2}, {"cell", json::object()}}, "'layer.config.cell'"},
  };
  for (const auto& [config, message] : bad)
    EXPECT_NE(config_error("GRU", config).find(message), std::string::npos)
        << config.dump() << ": " << config_error("GRU", config);
  // return_state reads back; a Bidirectional's backward layer must return what its forward does.
  EXPECT_EQ(make("GRU", {{"units", 2}, {"return_state", true}})->config()["return_state"], true);
  const json stated = {{"class_name", "LSTM"},
                       {"config", {{"name", "lstm"}, {"units", 3}, {"return_state", true}}}};
  json unstated = stated;
  unstated["config"]["return_state"] = false;
  unstated["config"]["go_backwards"] = true;
  EXPECT_NE(
      test::layer_config_error("Bidirectional", {{"layer", stated}, {"backward_layer", unstated}})
          .find("'layer.config.backward_layer': its return_state must be the forward "
                "layer's"),
      std::string::npos)
      << test::layer_config_error("Bidirectional",
                                  {{"layer", stated}, {"backward_layer", unstated}});
  EXPECT_EQ(make("Bidirectional", {{"layer", stated}})->config()["layer"]["config"]["return_state"],
            true);
  Rng init(1);
  EXPECT_THROW(make("LSTM", {{"units", 2}})->build({4}, init), ShapeError);  // not sequences
}

TEST(Bidirectional, ConfigsReadBackAndBadOnesAreRefusedAtTheirPlace) {
  const json lstm = {{"class_name", "LSTM"},
                     {"config", {{"name", "lstm"}, {"units", 3}, {"return_sequences", true}}}};
  auto layer = make("Bidirectional", {{"layer", lstm}, {"merge_mode", "ave"}});
  const json written = layer->config();
  EXPECT_EQ(written["layer"]["config"]["name"], "lstm");
  EXPECT_EQ(written["merge_mode"], "ave");
  EXPECT_EQ(make("Bidirectional", written)->config(), written);
  std::vector<std::string> names;
  for (Parameter* p : layer->parameters()) names.push_back(p->name);
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "forward_lstm/lstm_cell/kernel", "forward_lstm/lstm_cell/recurrent_kernel",
                "forward_lstm/lstm_cell/bias", "backward_lstm/lstm_cell/kernel",
                "backward_lstm/lstm_cell/recurrent_kernel", "backward_lstm/lstm_cell/bias"}));
  // Keras 3 writes the layers' configs with the names it gave them; the weights keep theirs.
  json keras3 = {{"layer", lstm}, {"backward_layer", lstm}};
  keras3["layer"]["config"]["name"] = "forward_lstm";
  keras3["backward_layer"]["config"]["name"] = "backward_lstm";
  keras3["backward_layer"]["config"]["go_backwards"] = true;
  auto from_keras3 = make("Bidirectional", keras3);
  EXPECT_EQ(from_keras3->parameters()[0]->name, "forward_lstm/lstm_cell/kernel");
  EXPECT_EQ(from_keras3->parameters()[3]->name, "backward_lstm/lstm_cell/kernel");
  Rng init(1);
  EXPECT_EQ(layer->build({4, 2}, init), (Shape{4, 3}));
  EXPECT_EQ(make("Bidirectional", {{"layer", lstm}})->build({4, 2}, init), (Shape{4, 6}));

  json forwards_too = lstm;
  forwards_too["config"]["name"] = "back";
  const auto rnn_over = [](const json& cell) {
    return json{{"class_name", "RNN"}, {"config", {{"cell", cell}}}};
  };
  const json stacked_cells = {
      {"class_name", "StackedRNNCells"},
      {"config",
       {{"cells", json::array({json{{"class_name", "GRUCell"}, {"config", {{"units", 2}}}}})}}}};
  const json no_units = {{"class_name", "GRUCell"}, {"config", {{"units", 0}}}};
  const std::vector<std::pair<json, std::string>> bad{
      {{{"layer", lstm}, {"merge_mode", nullptr}},
       "'layer.config.merge_mode': null (the two directions' outputs as two tensors)"},
      {{{"layer", lstm}, {"merge_mode", "max"}}, "'layer.config.merge_mode'"},
      {{{"layer", {{"class_name", "Dense"}, {"config", {{"units", 2}}}}}},
       "'layer.config.layer.class_name': Bidirectional wraps a SimpleRNN, LSTM, GRU or RNN, got "
       "'Dense'"},
      {{{"layer", rnn_over(stacked_cells)}},
       "'layer.config.layer.config.cell.class_name': Bidirectional wraps an RNN over one cell, got "
       "StackedRNNCells, which Tandem does not run in two directions"},
      {{{"layer", rnn_over(no_units)}}, "'layer.config.layer.config.cell.config.units'"},
      {json::object(), "'layer.config.layer'"},
      {{{"layer", lstm}, {"backward_layer", forwards_too}},
       "'layer.config.backward_layer': its go_backwards must be the opposite"},
      {{{"layer", {{"class_name", "LSTM"}, {"config", {{"units", 2}, {"stateful", true}}}}}},
       "'layer.config.layer.config.stateful'"},
  };
  for (const auto& [config, message] : bad)
    EXPECT_NE(config_error("Bidirectional", config).find(message), std::string::npos)
        << config.dump() << ": " << config_error("Bidirectional", config);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
