// Keras' RNN layer over one of its cells (LSTMCell, GRUCell, SimpleRNNCell), as
// `keras.layers.RNN(keras.layers.LSTMCell(8))` writes it: the cell's layer under the class name
// RNN, computing bit for bit what that layer computes with the same weights, its weights named
// after the cell as Keras 2 names them, its config written back in the RNN form, and every bad
// cell refused at its JSON path. (Values and gradients against torch: tests/oracle.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/model.hpp"
#include "tandem/rng.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json sequence_model(const json& layer) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"name", "m"},
            {"layers", json::array({{{"class_name", "InputLayer"},
                                     {"config", {{"batch_input_shape", {nullptr, 5, 3}}}}},
                                    layer})}}}};
}

json rnn(const std::string& cell, json cell_config, json flags = json::object()) {
  json config = std::move(flags);
  config["cell"] = {{"class_name", cell}, {"config", std::move(cell_config)}};
  return {{"class_name", "RNN"}, {"config", config}};
}

TEST(RnnLayer, ComputesItsCellsLayerBitForBitUnderKerasNames) {
  struct Pair {
    json rnn, layer;
    std::vector<std::string> weight_names;
  };
  const std::vector<Pair> pairs = {
      {rnn("LSTMCell", {{"name", "lstm_cell_3"}, {"units", 4}, {"unit_forget_bias", false}},
           {{"return_sequences", true}}),
       {{"class_name", "LSTM"},
        {"config", {{"units", 4}, {"unit_forget_bias", false}, {"return_sequences", true}}}},
       {"lstm_cell_3/kernel", "lstm_cell_3/recurrent_kernel", "lstm_cell_3/bias"}},
      {rnn("GRUCell", {{"units", 3}, {"reset_after", false}}, {{"go_backwards", true}}),
       {{"class_name", "GRU"},
        {"config", {{"units", 3}, {"reset_after", false}, {"go_backwards", true}}}},
       {"gru_cell/kernel", "gru_cell/recurrent_kernel", "gru_cell/bias"}},
      {rnn("SimpleRNNCell", {{"units", 2}, {"use_bias", false}, {"activation", "relu"}}),
       {{"class_name", "SimpleRNN"},
        {"config", {{"units", 2}, {"use_bias", false}, {"activation", "relu"}}}},
       {"simple_rnn_cell/kernel", "simple_rnn_cell/recurrent_kernel"}}};
  for (const Pair& p : pairs) {
    SCOPED_TRACE(p.rnn.dump());
    auto a = Model::from_config(sequence_model(p.rnn), "model", 0);
    auto b = Model::from_config(sequence_model(p.layer), "model", 0);
    EXPECT_EQ(a->layer(0).class_name(), "RNN");
    EXPECT_EQ(a->layer(0).name(), "rnn");
    EXPECT_EQ(a->output_shape(), b->output_shape());
    const std::vector<Parameter*> wa = a->layer(0).parameters(), wb = b->layer(0).parameters();
    ASSERT_EQ(wa.size(), p.weight_names.size());
    Rng rng(7);
    for (std::size_t i = 0; i < wa.size(); ++i) {
      EXPECT_EQ(wa[i]->name, p.weight_names[i]);
      ASSERT_EQ(wa[i]->value.shape(), wb[i]->value.shape());
      for (std::int64_t k = 0; k < wa[i]->value.size(); ++k)
        wa[i]->value[k] = wb[i]->value[k] = 0.5f * rng.normal();
    }
    Tensor x({4, 5, 3});
    for (std::int64_t k = 0; k < x.size(); ++k) x[k] = rng.normal();
    const Tensor ya = a->forward(x, true).clone();
    const Tensor& yb = b->forward(x, true);
    ASSERT_EQ(ya.shape(), yb.shape());
    EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0);
    Tensor dy(ya.shape());
    for (std::int64_t k = 0; k < dy.size(); ++k) dy[k] = rng.normal();
    a->backward(dy);
    b->backward(dy);
    for (std::size_t i = 0; i < wa.size(); ++i)
      EXPECT_EQ(
          std::memcmp(wa[i]->grad.data(), wb[i]->grad.data(), wa[i]->grad.size() * sizeof(float)),
          0)
          << wa[i]->name;
    // Written back in the RNN form, the config builds the same layer.
    const json cfg = a->layer(0).config();
    EXPECT_EQ(cfg["cell"]["class_name"], p.rnn["config"]["cell"]["class_name"]);
    EXPECT_FALSE(cfg.contains("units"));
    auto again =
        Model::from_config(sequence_model({{"class_name", "RNN"}, {"config", cfg}}), "model", 0);
    EXPECT_EQ(again->layer(0).config(), cfg);
    EXPECT_EQ(again->layer(0).parameters()[0]->name, p.weight_names[0]);
  }
}

TEST(RnnLayer, BadCellsAreRefusedAtTheirPlace) {
  const std::string at = "'model.config.layers[1].config.";
  auto expect_error = [&](const json& layer, const std::string& where, const std::string& what) {
    const std::string e = test::model_config_error(sequence_model(layer));
    EXPECT_NE(e.find(at + where + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  expect_error(rnn("PeepholeCell", {{"units", 2}}), "cell.class_name",
               "Tandem's RNN takes an LSTMCell, GRUCell or SimpleRNNCell, got 'PeepholeCell' (a "
               "cell written in Python cannot be read)");
  expect_error(rnn("StackedRNNCells", {{"cells", json::array()}}), "cell.class_name",
               "got 'StackedRNNCells' (write the cells as recurrent layers one after the other, "
               "every layer but the last with return_sequences: the same outputs)");
  expect_error(rnn("LSTMCell", {{"units", 0}}), "cell.config.units", "");
  expect_error(rnn("LSTMCell", {{"units", 2}, {"peepholes", true}}), "cell.config.peepholes", "");
  expect_error(rnn("GRUCell", {{"units", 2}}, {{"stateful", true}}), "stateful",
               "states carried from batch to batch are not supported by Tandem");
  json not_object = rnn("LSTMCell", {{"units", 2}});
  not_object["config"]["cell"]["config"] = 3;
  expect_error(not_object, "cell.config", "expected an object");
  json no_cell = {{"class_name", "RNN"}, {"config", {{"return_sequences", true}}}};
  expect_error(no_cell, "cell", "");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
