// Mutation fuzzing of the model, objective and run-config readers: real configs (the resources'
// Keras 2 Sequential and ResNet, the Keras 3 transformer, a two-input two-output graph) with one or
// two random edits each — a value replaced by another type, an extreme number, a key removed, a
// list entry duplicated or dropped — must either build, or be refused with Tandem's own error
// (which names a place). Anything else (a crash, a bare std::exception from the JSON library or the
// standard library) fails, printing the edited config. A model that builds also runs a forward
// pass on zeros. Seeded: the same edits on every run. Under a sanitizer each loop runs the
// first quarter of its rounds (the same edits): all of them took 51 s there, against 7 s in the
// release build, which runs them all.
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "backend/kernel_math.hpp"
#include "data/dataset.hpp"
#include "nn/objective.hpp"
#include "optim/optimizer.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "tandem/rng.hpp"
#include "test_support.hpp"
#include "train/run_config.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// Every node of a document, as pointers into it (objects' values and arrays' entries).
void collect(json& node, std::vector<json*>& out) {
  out.push_back(&node);
  if (node.is_object())
    for (auto& [key, value] : node.items()) collect(value, out);
  if (node.is_array())
    for (auto& value : node) collect(value, out);
}

json replacement(Rng& rng) {
  switch (rng.below(12)) {
    case 0: return nullptr;
    case 1: return -1;
    case 2: return 0;
    case 3: return std::numeric_limits<std::int64_t>::max();
    case 4: return 1e308;
    case 5: return -0.5;
    case 6: return "";
    case 7: return "relu";
    case 8: return json::array();
    case 9: return json::object();
    case 10: return json::array({nullptr, 3});
    default: return true;
  }
}

// One random edit somewhere in `doc`.
void mutate(json& doc, Rng& rng) {
  std::vector<json*> nodes;
  collect(doc, nodes);
  json& node = *nodes[rng.below(nodes.size())];
  const auto how = rng.below(4);
  if (how == 0 && node.is_object() && !node.empty()) {
    auto it = node.begin();
    std::advance(it, static_cast<long>(rng.below(node.size())));
    node.erase(it);
  } else if (how == 1 && node.is_array() && !node.empty()) {
    const auto i = rng.below(node.size());
    if (rng.below(2) == 0)
      node.erase(i);
    else
      node.push_back(node[i]);
  } else {
    node = replacement(rng);
  }
}

// How many of `rounds` edits this build tries (see the top of the file).
int rounds_here(int rounds) {
  return test::kSanitizer ? rounds / 4 : rounds;
}

struct Outcome {
  bool built = false;
  std::string failure;  // empty: built, or refused with a Tandem error
};

Outcome try_config(const std::function<void()>& build) {
  Outcome o;
  try {
    build();
    o.built = true;
  } catch (const Error&) {
  } catch (const std::exception& e) {
    o.failure = std::string("a ") + typeid(e).name() + ": " + e.what();
  }
  return o;
}

void fuzz_model(const json& original, std::uint64_t seed, int all_rounds) {
  const int rounds = rounds_here(all_rounds);
  Rng rng(seed);
  int built = 0, refused = 0;
  for (int round = 0; round < rounds; ++round) {
    json doc = original;
    const auto edits = 1 + rng.below(2);
    for (std::uint64_t e = 0; e < edits; ++e) mutate(doc, rng);
    const Outcome o = try_config([&] {
      auto model = Model::from_config(doc, "model", 1);
      Shape shape{2};
      for (auto d : model->input_shape()) shape.push_back(d);
      Tensor x(shape);
      x.fill(0.0f);
      model->forward(x, true);
    });
    ASSERT_TRUE(o.failure.empty()) << o.failure << "\nround " << round << ", config:\n"
                                   << doc.dump();
    (o.built ? built : refused) += 1;
  }
  // The edits hit both ways: not every config refused, not every edit harmless.
  EXPECT_GT(built, 0);
  EXPECT_GT(refused, rounds / 10);
}

json resource_model(const char* name) {
  return load_json_file(test::source_dir() / "resources/configs" / name)["model"];
}

// The model of a run_config fuzz seed (tests/fuzz/corpus/run_config_fuzz/<file>), which builds
// as it is, fuzzed.
void fuzz_seed_model(const char* file, std::uint64_t seed, int rounds) {
  const json model =
      load_json_file(test::source_dir() / "tests/fuzz/corpus/run_config_fuzz" / file)["model"];
  ASSERT_NO_THROW(Model::from_config(model, "model", 1)) << file;
  fuzz_model(model, seed, rounds);
}

TEST(ConfigMutation, KerasSequentialConfigsNeverFailButWithTheirPlace) {
  fuzz_model(resource_model("fashion-mlp.json"), 1, 3000);
  fuzz_model(resource_model("fashion-cnn.json"), 2, 1000);
}

TEST(ConfigMutation, FunctionalGraphsNeverFailButWithTheirPlace) {
  fuzz_model(resource_model("tiny-transformer.json"), 3, 2000);
  fuzz_model(resource_model("fashion-resnet.json"), 4, 400);
  fuzz_model(resource_model("tiny-bert.json"), 5, 1000);
}

const char* kTwoHeads = R"({"class_name": "Functional", "config": {"name": "two_heads",
  "layers": [
  {"class_name": "InputLayer", "name": "a", "config": {"batch_input_shape": [null, 3]},
   "inbound_nodes": []},
  {"class_name": "InputLayer", "name": "b", "config": {"batch_input_shape": [null, 2]},
   "inbound_nodes": []},
  {"class_name": "Dense", "name": "trunk", "config": {"name": "trunk", "units": 4,
   "activation": "tanh"}, "inbound_nodes": [[["a", 0, 0, {}]]]},
  {"class_name": "Concatenate", "name": "join", "config": {"name": "join", "axis": -1},
   "inbound_nodes": [[["trunk", 0, 0, {}], ["b", 0, 0, {}]]]},
  {"class_name": "Dense", "name": "cls", "config": {"name": "cls", "units": 3},
   "inbound_nodes": [[["join", 0, 0, {}]]]},
  {"class_name": "Dense", "name": "reg", "config": {"name": "reg", "units": 1},
   "inbound_nodes": [[["trunk", 0, 0, {}]]]}],
  "input_layers": [["a", 0, 0], ["b", 0, 0]], "output_layers": [["cls", 0, 0], ["reg", 0, 0]]}})";

TEST(ConfigMutation, SeveralInputsAndOutputsNeverFailButWithTheirPlace) {
  fuzz_model(json::parse(kTwoHeads), 5, 3000);
}

TEST(ConfigMutation, NestedModelsNeverFailButWithTheirPlace) {
  // A siamese encoder (a Functional model called twice) and a Sequential head, nested.
  fuzz_seed_model("nested-models.json", 8, 3000);
}

TEST(ConfigMutation, CategoryLayersNeverFailButWithTheirPlace) {
  // Discretization's modes and a CategoryEncoding of its bins.
  fuzz_seed_model("categories.json", 9, 2000);
}

TEST(ConfigMutation, FunctionsOnKerasTensorsNeverFailButWithTheirPlace) {
  // tf.keras 2's TFOpLambda entries (a tensor sum, constants times and minus, relu6, matmul,
  // transpose, concat, reshape, reduce_mean) read as the layers that compute them.
  fuzz_seed_model("tf-functions.json", 41, 2000);
  // Keras 3's operations (x + y, 0.5 * x, x - a NumPy array, leaky_relu, x / 2, softmax).
  fuzz_seed_model("keras3-operations.json", 42, 2000);
  // x[...], squeeze and expand_dims (TandemIndexing): tf.keras 2's SlicingOpLambda and
  // TFOpLambda entries (with l2_normalize and a cast), Keras 3's GetItem (slices, an ellipsis),
  // Squeeze, ExpandDims (two axes).
  fuzz_seed_model("indexing-tf.json", 43, 2000);
  fuzz_seed_model("indexing-keras3.json", 44, 2000);
}

TEST(ConfigMutation, IntegerLookupsNeverFailButWithTheirPlace) {
  // IntegerLookup with a mask and leading special tokens into an Embedding, and one with two OOV
  // indices counting tf_idf padded to max_tokens.
  fuzz_seed_model("integer-lookup.json", 10, 2000);
}

TEST(ConfigMutation, RecurrentLayersNeverFailButWithTheirPlace) {
  // An LSTM with both dropouts, a GRU backwards with its own gate activation and a regularizer,
  // and a SimpleRNN without bias, stacked.
  fuzz_seed_model("recurrent.json", 10, 2000);
}

TEST(ConfigMutation, MaskedStepsNeverFailButWithTheirPlace) {
  // Embedding's mask_zero through Dropout, a Bidirectional GRU, Masking again and an LSTM.
  fuzz_seed_model("masked-steps.json", 11, 2000);
}

TEST(ConfigMutation, TimeDistributedNeverFailsButWithItsPlace) {
  // A clip's frames through a wrapped Conv2D, Dropout and pooling, an LSTM, a wrapped Dense.
  fuzz_seed_model("time-distributed.json", 15, 2000);
}

TEST(ConfigMutation, SequenceShapeLayersNeverFailButWithTheirPlace) {
  // An LSTM autoencoder (RepeatVector, TimeDistributed) with padded, repeated, cut, group-
  // normalised and permuted steps.
  fuzz_seed_model("sequence-shapes.json", 16, 2000);
}

TEST(ConfigMutation, AttentionNeverFailsButWithItsPlace) {
  // Keras' Attention on a padded sequence (masks, scale, dropout), then pooling.
  fuzz_seed_model("attention.json", 17, 2000);
}

TEST(ConfigMutation, MasksJoinedByConcatenateNeverFailButWithTheirPlace) {
  // Embedding's mask_zero joined side by side with an LSTM's sequences, then one after the other.
  fuzz_seed_model("masked-concatenate.json", 12, 2000);
}

// Mutations of `original` (loss, loss_weights and metrics) made into an objective for `model`:
// built, or refused with a ConfigError naming the place.
void fuzz_objective(const Model& model, const json& original, std::uint64_t seed, int rounds_max) {
  Rng rng(seed);
  int built = 0;
  const int rounds = rounds_here(rounds_max);
  for (int round = 0; round < rounds; ++round) {
    json doc = original;
    mutate(doc, rng);
    const auto field = [&](const char* key) {
      return doc.is_object() && doc.contains(key) ? doc[key] : json();
    };
    const Outcome o = try_config([&] {
      make_objective(field("loss"), field("loss_weights"), field("metrics"), model);
    });
    ASSERT_TRUE(o.failure.empty()) << o.failure << "\nround " << round << ":\n" << doc.dump();
    built += o.built ? 1 : 0;
  }
  EXPECT_GT(built, 0);
  EXPECT_LT(built, rounds);
}

TEST(ConfigMutation, ObjectivesOfPositionsNeverFailButWithTheirPlace) {
  // A tagger's loss and metrics at each of its steps (seed per-position.json).
  const json seed =
      load_json_file(test::source_dir() / "tests/fuzz/corpus/run_config_fuzz/per-position.json");
  fuzz_model(seed["model"], 13, 1000);
  const auto model = Model::from_config(seed["model"], "model", 1);
  fuzz_objective(*model, {{"loss", seed["loss"]}, {"metrics", seed["metrics"]}}, 14, 3000);
}

TEST(ConfigMutation, MaskedTaggersAndIgnoredClassesNeverFailButWithTheirPlace) {
  // A padded tagger whose output carries the mask, its loss ignoring a class (seed
  // masked-tagger.json).
  const json seed =
      load_json_file(test::source_dir() / "tests/fuzz/corpus/run_config_fuzz/masked-tagger.json");
  fuzz_model(seed["model"], 18, 1500);
  const auto model = Model::from_config(seed["model"], "model", 1);
  ASSERT_TRUE(model->output_masked(0));
  fuzz_objective(*model, {{"loss", seed["loss"]}, {"metrics", seed["metrics"]}}, 19, 2000);
}

TEST(ConfigMutation, MovingAverageOptimizersNeverFailButWithTheirPlace) {
  // tf.keras 2.15's AdamW config with use_ema and ema_overwrite_frequency (seed
  // moving-average.json).
  const json seed =
      load_json_file(test::source_dir() / "tests/fuzz/corpus/run_config_fuzz/moving-average.json");
  ASSERT_TRUE(make_optimizer(seed["optimizer"], "optimizer")->desc().ema_keras2);
  Rng rng(23);
  int built = 0;
  const int rounds = rounds_here(2000);
  for (int round = 0; round < rounds; ++round) {
    json doc = seed["optimizer"];
    mutate(doc, rng);
    const Outcome o = try_config([&] { make_optimizer(doc, "optimizer"); });
    ASSERT_TRUE(o.failure.empty()) << o.failure << "\nround " << round << ":\n" << doc.dump();
    built += o.built ? 1 : 0;
  }
  EXPECT_GT(built, 0);
  EXPECT_LT(built, rounds);
}

TEST(ConfigMutation, ObjectivesNeverFailButWithTheirPlace) {
  const auto model = Model::from_config(json::parse(kTwoHeads), "model", 1);
  const json original = {
      {"loss",
       {{"cls", {{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
        {"reg", "huber"}}},
      {"loss_weights", {{"cls", 1.0}, {"reg", 0.5}}},
      {"metrics",
       {{"cls", {"accuracy", {{"class_name", "TopKCategoricalAccuracy"}, {"config", {{"k", 2}}}}}},
        {"reg", {"mae", {{"class_name", "Precision"}, {"config", {{"thresholds", 0.3}}}}}}}}};
  fuzz_objective(*model, original, 6, 4000);
}

// A whole run config (the resources' MLP with a synthetic dataset): the run-config reader, the
// model, objective and optimizer made from it, and the dataset spec.
TEST(ConfigMutation, RunConfigsNeverFailButWithTheirPlace) {
  json original = load_json_file(test::source_dir() / "resources/configs/fashion-mlp.json");
  original["data"] = {{"train",
                       {{"type", "synthetic"}, {"samples", 64}, {"x_shape", {28, 28}},
                        {"task", "classes"}, {"classes", 10}, {"seed", 1}}},
                      {"validation_split", 0.25}};
  original["optimizer"] = {{"class_name", "SGD"},
                           {"config", {{"lr", 0.01}, {"decay", 0.001}, {"momentum", 0.9}}}};
  Rng rng(7);
  int built = 0;
  const int rounds = rounds_here(1500);
  for (int round = 0; round < rounds; ++round) {
    json doc = original;
    mutate(doc, rng);
    const Outcome o = try_config([&] {
      const RunConfig rc = parse_run_config(doc, test::source_dir());
      const auto model = Model::from_config(rc.model, "model", rc.seed);
      make_objective(rc.loss, rc.loss_weights, rc.metrics, *model);
      make_optimizer(rc.optimizer, "optimizer");
      const auto data = make_dataset(rc.data.train, "data.train", test::source_dir().string());
      Tensor x(Shape{1, shape_size(data->x_shape())}), y(Shape{1, shape_size(data->y_shape())});
      const std::int64_t first = 0;
      data->read({&first, 1}, x.data(), y.data());
    });
    ASSERT_TRUE(o.failure.empty()) << o.failure << "\nround " << round << ":\n" << doc.dump();
    built += o.built ? 1 : 0;
  }
  EXPECT_GT(built, 0);
  EXPECT_LT(built, rounds);
}

}  // namespace
}  // namespace tandem
