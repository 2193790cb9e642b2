// Keras' order of a functional model's layers (nn/keras_layer_order.hpp), against orders worked
// out by hand from Keras 2.15's _map_graph_network (the same as Keras 3's map_graph), and what
// follows from it: a checkpoint lists the layers in that order whatever order the config lists
// them in, a file whose names are not the model's is paired by it (as Keras' load_weights
// pairs), and the summary's rows follow it.
#include "nn/keras_layer_order.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using nn::FunctionalCall;

// out = Add(b(a(x)), c(x)), layers numbered a 0, b 1, c 2, out 3. The walk from out meets out,
// b, a, x, then c (numbers 0-4); depths: out 0, b and c 1 (out reads them), a 2, x 3 (a reads
// it: the deeper of its two readers). Deepest first, b before c by the walk: x, a, b, c, out.
TEST(KerasLayerOrder, DeepestFirstThenInTheOrderAWalkFromTheOutputsMeetsThem) {
  const std::vector<FunctionalCall> calls{{0, 0, {-1}}, {1, 0, {0}}, {2, 0, {-1}}, {3, 0, {1, 2}}};
  EXPECT_EQ(nn::keras_layer_order(1, calls, {3}), (std::vector<int>{-1, 0, 1, 2, 3}));
  // The same graph with c's call first (as a config listing c first runs it): the same order.
  const std::vector<FunctionalCall> c_first{
      {2, 0, {-1}}, {0, 0, {-1}}, {1, 0, {1}}, {3, 0, {2, 0}}};
  EXPECT_EQ(nn::keras_layer_order(1, c_first, {3}), (std::vector<int>{-1, 0, 1, 2, 3}));
}

// x1 -> a -> b; out = Add(b, x2). The walk meets out, b, a, x1, x2; depths out 0, b and x2 1,
// a 2, x1 3: an InputLayer read late stands among the layers, x1, a, b, x2, out.
TEST(KerasLayerOrder, AnInputReadLateStandsAtItsDepth) {
  const std::vector<FunctionalCall> calls{{0, 0, {-1}}, {1, 0, {0}}, {2, 0, {1, -2}}};
  EXPECT_EQ(nn::keras_layer_order(2, calls, {2}), (std::vector<int>{-1, 0, 1, -2, 2}));
}

// y = s(d(s(x))) with one layer s (0) called twice and d (1). The walk meets s (its second
// call), d, x; the calls' depths are 0, 1, 2 and x's 3; a layer takes its deepest call's
// depth: s 2, d 1. So x, s, d. Two outputs: y1 = A(x), y2 = B(y1): A is 1 deep (B reads it).
TEST(KerasLayerOrder, ASharedLayerTakesItsDeepestCallsDepth) {
  const std::vector<FunctionalCall> shared{{0, 0, {-1}}, {1, 0, {0}}, {0, 1, {1}}};
  EXPECT_EQ(nn::keras_layer_order(1, shared, {2}), (std::vector<int>{-1, 0, 1}));
  const std::vector<FunctionalCall> chained{{0, 0, {-1}}, {1, 0, {0}}};
  EXPECT_EQ(nn::keras_layer_order(1, chained, {0, 1}), (std::vector<int>{-1, 0, 1}));
  // A chain of 100,000 calls walks without recursion.
  std::vector<FunctionalCall> chain;
  for (int k = 0; k < 100000; ++k) chain.push_back({static_cast<std::size_t>(k), 0, {k - 1}});
  const std::vector<int> order = nn::keras_layer_order(1, chain, {99999});
  ASSERT_EQ(order.size(), 100001u);
  EXPECT_EQ(order.front(), -1);
  EXPECT_EQ(order.back(), 99999);
}

// The first graph as a config that lists its layers x, c, a, b, out.
json reordered_config(const char* a, const char* b, const char* c) {
  const auto dense = [](const char* name, const char* reads, const char* activation) {
    return json{{"class_name", "Dense"},
                {"name", name},
                {"config", {{"name", name}, {"units", 3}, {"activation", activation}}},
                {"inbound_nodes", json::parse(std::string("[[[\"") + reads + "\", 0, 0, {}]]]")}};
  };
  json layers = json::array();
  layers.push_back({{"class_name", "InputLayer"},
                    {"name", "x"},
                    {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 3}}}},
                    {"inbound_nodes", json::array()}});
  layers.push_back(dense(c, "x", "linear"));
  layers.push_back(dense(a, "x", "tanh"));
  layers.push_back(dense(b, a, "linear"));
  layers.push_back({{"class_name", "Add"},
                    {"name", "out"},
                    {"config", {{"name", "out"}}},
                    {"inbound_nodes", json::parse(std::string("[[[\"") + b + "\", 0, 0, {}], [\"" +
                                                  c + "\", 0, 0, {}]]]")}});
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"layers", layers},
            {"input_layers", {{"x", 0, 0}}},
            {"output_layers", {{"out", 0, 0}}}}}};
}

std::vector<std::string> listed(const CheckpointData& data) {
  std::vector<std::string> names;
  for (const LayerWeights& lw : data.layers) names.push_back(lw.layer);
  return names;
}

// Keras would build the reordered config into layers x, a, b, c, out and save them so; a file
// Keras saved from a model of other layer names (dense_7, dense_8, dense_9 for a, b, c) pairs by
// that order: a's weights to a, not to c (the config's first Dense).
TEST(KerasLayerOrder, CheckpointsListAndFilesPairByKerasOrderNotTheConfigs) {
  auto model = Model::from_config(reordered_config("a", "b", "c"), "model", 1);
  CheckpointData saved;
  model->save_weights(saved);
  EXPECT_EQ(listed(saved), (std::vector<std::string>{"x", "a", "b", "c", "out"}));
  auto keras_named =
      Model::from_config(reordered_config("dense_7", "dense_8", "dense_9"), "model", 2);
  CheckpointData file;
  keras_named->save_weights(file);
  EXPECT_EQ(listed(file), (std::vector<std::string>{"x", "dense_7", "dense_8", "dense_9", "out"}));
  auto loaded = Model::from_config(reordered_config("a", "b", "c"), "model", 3);
  EXPECT_EQ(loaded->load_weights(file, "keras.h5"),
            "its layers are named otherwise than the model's: their weights were paired by "
            "order, as Keras' load_weights pairs them ('dense_7' to 'a', 'dense_8' to 'b', "
            "'dense_9' to 'c')");
  const Tensor x = Tensor::from_vector({2, 3}, {0.1f, -0.4f, 0.7f, 1.2f, 0.3f, -0.9f});
  const Tensor expected = keras_named->forward(x, false).clone();
  const Tensor got = loaded->forward(x, false);
  for (std::int64_t k = 0; k < expected.size(); ++k) EXPECT_EQ(got[k], expected[k]) << k;
  const std::string summary = loaded->summary();
  EXPECT_LT(summary.find(" a (Dense)"), summary.find(" b (Dense)")) << summary;
  EXPECT_LT(summary.find(" b (Dense)"), summary.find(" c (Dense)")) << summary;
}

// A name in UTF-8 is as wide as its characters: the columns stay in line.
TEST(KerasLayerOrder, SummaryColumnsCountCharactersNotBytes) {
  const std::string summary =
      Model::from_config(reordered_config("entrée", "b", "c"), "model", 1)->summary();
  const std::size_t plain = summary.find(" b (Dense)"), accented = summary.find(" entrée (Dense)");
  ASSERT_NE(accented, std::string::npos) << summary;
  const auto column_of_shape = [&](std::size_t row) {
    const std::size_t shape = summary.find("(None, 3)", row);
    return shape - row;
  };
  EXPECT_EQ(column_of_shape(plain), column_of_shape(accented) - 1) << summary;  // é is 2 bytes
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
