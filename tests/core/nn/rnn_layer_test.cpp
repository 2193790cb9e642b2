// Keras' RNN layer over one of its cells (LSTMCell, GRUCell, SimpleRNNCell), as
// `keras.layers.RNN(keras.layers.LSTMCell(8))` writes it: the cell's layer under the class name
// RNN, computing bit for bit what that layer computes with the same weights, its weights named
// after the cell as Keras 2 names them, its config written back in the RNN form, and every bad
// cell refused at its JSON path; over StackedRNNCells, the cells' layers one after the other.
// (Values and gradients against torch: tests/oracle.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "nn/keras3_weight_paths.hpp"
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

// Models `a` and `b` given the same random weights (`wa`, `wb`: theirs, in the same order and
// shapes) compute the same bits: outputs for the same sequences, weight gradients for the same
// output gradients.
void expect_same_bits(Model& a, Model& b, const std::vector<Parameter*>& wa,
                      const std::vector<Parameter*>& wb, std::uint64_t seed) {
  ASSERT_EQ(wa.size(), wb.size());
  Rng rng(seed);
  for (std::size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(wa[i]->value.shape(), wb[i]->value.shape());
    for (std::int64_t k = 0; k < wa[i]->value.size(); ++k)
      wa[i]->value[k] = wb[i]->value[k] = 0.5f * rng.normal();
  }
  Tensor x({4, 5, 3});
  for (std::int64_t k = 0; k < x.size(); ++k) x[k] = rng.normal();
  const Tensor ya = a.forward(x, true).clone();
  const Tensor& yb = b.forward(x, true);
  ASSERT_EQ(ya.shape(), yb.shape());
  EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0);
  Tensor dy(ya.shape());
  for (std::int64_t k = 0; k < dy.size(); ++k) dy[k] = rng.normal();
  a.backward(dy);
  b.backward(dy);
  for (std::size_t i = 0; i < wa.size(); ++i)
    EXPECT_EQ(
        std::memcmp(wa[i]->grad.data(), wb[i]->grad.data(), wa[i]->grad.size() * sizeof(float)), 0)
        << wa[i]->name;
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
    for (std::size_t i = 0; i < wa.size(); ++i) EXPECT_EQ(wa[i]->name, p.weight_names[i]);
    expect_same_bits(*a, *b, wa, wb, 7);
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

// StackedRNNCells: the cells' layers one after the other (every step but the last's), bit for
// bit; the cells' weights under the stack's name as Keras 2 names them, and Keras 3's paths
// (the stack's list `cells`, each cell under its class's name, numbered).
TEST(RnnLayer, StackedCellsAreTheirLayersOneAfterTheOther) {
  const json cells = {
      {{"class_name", "LSTMCell"}, {"config", {{"name", "lstm_cell"}, {"units", 4}}}},
      {{"class_name", "LSTMCell"}, {"config", {{"name", "lstm_cell_1"}, {"units", 3}}}},
      {{"class_name", "GRUCell"}, {"config", {{"name", "gru_cell"}, {"units", 2}}}}};
  const json stacked = rnn("StackedRNNCells", {{"cells", cells}}, {{"go_backwards", true}});
  auto a = Model::from_config(sequence_model(stacked), "model", 0);
  const auto layer = [](const char* cls, json config) {
    return json{{"class_name", cls}, {"config", std::move(config)}};
  };
  json layers = json::array(
      {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 5, 3}}}}},
       layer("LSTM", {{"units", 4}, {"return_sequences", true}, {"go_backwards", true}}),
       layer("LSTM", {{"units", 3}, {"return_sequences", true}}),
       layer("GRU", {{"units", 2}})});
  auto b = Model::from_config(
      {{"class_name", "Sequential"}, {"config", {{"name", "m"}, {"layers", layers}}}}, "model", 0);
  EXPECT_EQ(a->layer(0).class_name(), "RNN");
  EXPECT_EQ(a->output_shape(), (Shape{2}));
  std::vector<Parameter*> wa = a->layer(0).parameters(), wb;
  for (std::size_t i = 0; i < 3; ++i)
    for (Parameter* p : b->layer(i).parameters()) wb.push_back(p);
  ASSERT_EQ(wa.size(), 9u);
  ASSERT_EQ(wb.size(), 9u);
  EXPECT_EQ(wa[0]->name, "stacked_rnn_cells/lstm_cell/kernel");
  EXPECT_EQ(wa[4]->name, "stacked_rnn_cells/lstm_cell_1/recurrent_kernel");
  EXPECT_EQ(wa[8]->name, "stacked_rnn_cells/gru_cell/bias");
  expect_same_bits(*a, *b, wa, wb, 11);

  std::vector<std::string> keras2;
  for (Parameter* p : wa) keras2.push_back(p->name);
  EXPECT_EQ(nn::keras3_weight_names(a->layer(0), keras2),
            (std::vector<std::string>{
                "cell/cells/lstm_cell/0", "cell/cells/lstm_cell/1", "cell/cells/lstm_cell/2",
                "cell/cells/lstm_cell_1/0", "cell/cells/lstm_cell_1/1", "cell/cells/lstm_cell_1/2",
                "cell/cells/gru_cell/0", "cell/cells/gru_cell/1", "cell/cells/gru_cell/2"}));

  const json cfg = a->layer(0).config();
  EXPECT_EQ(cfg["cell"]["class_name"], "StackedRNNCells");
  EXPECT_EQ(cfg["cell"]["config"]["cells"].size(), 3u);
  EXPECT_EQ(cfg["go_backwards"], true);
  EXPECT_EQ(cfg["return_sequences"], false);
  auto again =
      Model::from_config(sequence_model({{"class_name", "RNN"}, {"config", cfg}}), "model", 0);
  EXPECT_EQ(again->layer(0).config(), cfg);
}

// Bidirectional over an RNN of one cell: the Bidirectional of the cell's layer, bit for bit, its
// weights named as Keras 2 names them ("forward_rnn/gru_cell/kernel").
TEST(RnnLayer, ABidirectionalRnnOverACellIsTheBidirectionalOfItsLayer) {
  const json over_cell = {{"class_name", "Bidirectional"},
                          {"config",
                           {{"merge_mode", "sum"},
                            {"layer", rnn("GRUCell", {{"name", "gru_cell"}, {"units", 3}},
                                          {{"return_sequences", true}})}}}};
  const json over_layer = {
      {"class_name", "Bidirectional"},
      {"config",
       {{"merge_mode", "sum"},
        {"layer",
         {{"class_name", "GRU"}, {"config", {{"units", 3}, {"return_sequences", true}}}}}}}};
  auto a = Model::from_config(sequence_model(over_cell), "model", 0);
  auto b = Model::from_config(sequence_model(over_layer), "model", 0);
  const std::vector<Parameter*> wa = a->layer(0).parameters(), wb = b->layer(0).parameters();
  ASSERT_EQ(wa.size(), 6u);
  EXPECT_EQ(wa[0]->name, "forward_rnn/gru_cell/kernel");
  EXPECT_EQ(wa[3]->name, "backward_rnn/gru_cell/kernel");
  expect_same_bits(*a, *b, wa, wb, 13);
  const json cfg = a->layer(0).config();
  EXPECT_EQ(cfg["layer"]["class_name"], "RNN");
  auto again = Model::from_config(
      sequence_model({{"class_name", "Bidirectional"}, {"config", cfg}}), "model", 0);
  EXPECT_EQ(again->layer(0).config(), cfg);
}

TEST(RnnLayer, BadCellsAreRefusedAtTheirPlace) {
  const std::string at = "'model.config.layers[1].config.";
  auto expect_error = [&](const json& layer, const std::string& where, const std::string& what) {
    const std::string e = test::model_config_error(sequence_model(layer));
    EXPECT_NE(e.find(at + where + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  expect_error(rnn("PeepholeCell", {{"units", 2}}), "cell.class_name",
               "Tandem's RNN takes an LSTMCell, GRUCell, SimpleRNNCell or StackedRNNCells of "
               "them, got 'PeepholeCell' (a cell written in Python cannot be read)");
  expect_error(rnn("StackedRNNCells", {{"cells", json::array()}}), "cell.config.cells",
               "expected a list of one or more cells, got []");
  expect_error(
      rnn("StackedRNNCells", {{"cells",
                               {{{"class_name", "LSTMCell"}, {"config", {{"units", 2}}}},
                                {{"class_name", "Peephole"}, {"config", {{"units", 2}}}}}}}),
      "cell.config.cells[1].class_name", "got 'Peephole'");
  expect_error(rnn("StackedRNNCells",
                   {{"cells", {{{"class_name", "LSTMCell"}, {"config", {{"units", -2}}}}}}}),
               "cell.config.cells[0].config.units", "");
  expect_error(rnn("StackedRNNCells",
                   {{"cells", {{{"class_name", "LSTMCell"}, {"config", {{"units", 2}}}}}}},
                   {{"return_state", true}}),
               "return_state", "the final states of stacked cells are not supported by Tandem");
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
