// IntegerLookup against the outputs Keras 3's own documentation gives for it (the lookups with
// one and two OOV indices, one_hot, multi_hot, count, tf_idf, the inverse lookup, an adapted
// vocabulary's special tokens), a mask token in each mode by hand, values truncated as Keras
// casts them, num_oov_indices 0 refusing an unknown value by its place, no gradient to the
// input, the config written back as Keras writes it, and every bad setting refused at its path.
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

const json kVocab = {12, 36, 1138, 42};

// Sequential([Input(shape), IntegerLookup(config)]).
std::unique_ptr<Model> lookup(const Shape& shape, json config) {
  json input_shape = json::array({nullptr});
  for (auto d : shape) input_shape.push_back(d);
  config["name"] = "lookup";
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "m"},
        {"layers", json::array({{{"class_name", "InputLayer"},
                                 {"config", {{"name", "x"}, {"batch_input_shape", input_shape}}}},
                                {{"class_name", "IntegerLookup"}, {"config", config}}})}}}};
  return Model::from_config(model, "model", 1);
}

std::vector<float> run(Model& model, const Shape& shape, const std::vector<float>& values) {
  Shape batch{static_cast<std::int64_t>(values.size()) / shape_size(shape)};
  batch.insert(batch.end(), shape.begin(), shape.end());
  const Tensor& y = model.forward(Tensor::from_vector(batch, values), false);
  return std::vector<float>(y.data(), y.data() + y.size());
}

std::string config_error(const json& config) {
  try {
    lookup({3}, config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(IntegerLookup, IndicesAsKerasDocumentsThem) {
  auto one = lookup({3}, {{"vocabulary", kVocab}});
  EXPECT_EQ(run(*one, {3}, {12, 1138, 42, 42, 1000, 36}), (std::vector<float>{1, 3, 4, 4, 0, 2}));
  EXPECT_EQ(one->output_shape(), (Shape{3}));
  // Two OOV indices: an unknown value's index is the value modulo 2 (37 -> 1, 1000 -> 0).
  auto two = lookup({3}, {{"vocabulary", kVocab}, {"num_oov_indices", 2}});
  EXPECT_EQ(run(*two, {3}, {12, 1138, 42, 37, 1000, 36}), (std::vector<float>{2, 4, 5, 1, 0, 3}));
  // Negative values floor as Python's modulo does: -3 -> 1, -4 -> 0.
  EXPECT_EQ(run(*two, {3}, {-3, -4, 12}), (std::vector<float>{1, 0, 2}));
  // The vocabulary adapt() leaves, led by the OOV token: [-1, 42, 1138, 1000, 36, 12].
  auto adapted = lookup({3}, {{"vocabulary", {-1, 42, 1138, 1000, 36, 12}}});
  EXPECT_EQ(run(*adapted, {3}, {12, 1138, 42, 42, 1000, 36}),
            (std::vector<float>{5, 2, 1, 1, 3, 4}));
  // Values are truncated toward zero as Keras casts them to int64; NaN is no key.
  EXPECT_EQ(run(*one, {3}, {12.9f, -0.5f, std::nanf("")}), (std::vector<float>{1, 0, 0}));
}

TEST(IntegerLookup, EncodedModesAsKerasDocumentsThem) {
  auto one_hot = lookup({1}, {{"vocabulary", kVocab}, {"output_mode", "one_hot"}});
  EXPECT_EQ(one_hot->output_shape(), (Shape{5}));
  EXPECT_EQ(run(*one_hot, {1}, {12, 36, 1138, 42, 7}),
            (std::vector<float>{0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,
                                1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0}));
  const std::vector<float> data = {12, 1138, 42, 42, 42, 7, 36, 7};
  auto multi_hot = lookup({4}, {{"vocabulary", kVocab}, {"output_mode", "multi_hot"}});
  EXPECT_EQ(run(*multi_hot, {4}, data), (std::vector<float>{0, 1, 0, 1, 1, 1, 0, 1, 0, 1}));
  auto binary = lookup({4}, {{"vocabulary", kVocab}, {"output_mode", "binary"}});  // older name
  EXPECT_EQ(run(*binary, {4}, data), (std::vector<float>{0, 1, 0, 1, 1, 1, 0, 1, 0, 1}));
  auto count = lookup({4}, {{"vocabulary", kVocab}, {"output_mode", "count"}});
  EXPECT_EQ(run(*count, {4}, data), (std::vector<float>{0, 1, 0, 1, 2, 2, 0, 1, 0, 1}));
  // tf_idf: the counts times the weights, the OOV index's the weights' mean (0.5).
  auto tf_idf = lookup(
      {4},
      {{"vocabulary", kVocab}, {"output_mode", "tf_idf"}, {"idf_weights", {0.25, 0.75, 0.6, 0.4}}});
  const std::vector<float> got = run(*tf_idf, {4}, data);
  const std::vector<float> want = {0, 0.25f, 0, 0.6f, 0.8f, 1.0f, 0, 0.75f, 0, 0.4f};
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  // pad_to_max_tokens widens the encoding with zeros.
  auto padded = lookup({4}, {{"vocabulary", kVocab},
                             {"output_mode", "multi_hot"},
                             {"max_tokens", 7},
                             {"pad_to_max_tokens", true}});
  EXPECT_EQ(padded->output_shape(), (Shape{7}));
  EXPECT_EQ(run(*padded, {4}, data),
            (std::vector<float>{0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0}));
}

TEST(IntegerLookup, TheInverseLookupMapsIndicesBackAsKerasDocumentsIt) {
  auto inverse = lookup({3}, {{"vocabulary", kVocab}, {"invert", true}});
  EXPECT_EQ(run(*inverse, {3}, {1, 3, 4, 4, 5, 2}), (std::vector<float>{12, 1138, 42, 42, -1, 36}));
  // With a mask token, index 0 is the mask token, 1 the OOV index (oov_token), 2 on the values.
  auto masked =
      lookup({3}, {{"vocabulary", kVocab}, {"invert", true}, {"mask_token", 0}, {"oov_token", -7}});
  EXPECT_EQ(run(*masked, {3}, {0, 1, 2, 5, 6, 9}), (std::vector<float>{0, -7, 12, 42, -7, -7}));
}

// By hand: with mask_token 0, "int" gives the mask index 0 and starts the OOV index at 1; the
// encoded modes drop masked values (no mask index among their columns).
TEST(IntegerLookup, AMaskTokenIsIndexZeroOrCountsNowhere) {
  auto ints = lookup({4}, {{"vocabulary", kVocab}, {"mask_token", 0}});
  EXPECT_EQ(run(*ints, {4}, {12, 0, 42, 7}), (std::vector<float>{2, 0, 5, 1}));
  auto counts = lookup({4}, {{"vocabulary", kVocab}, {"mask_token", 0}, {"output_mode", "count"}});
  EXPECT_EQ(counts->output_shape(), (Shape{5}));
  EXPECT_EQ(run(*counts, {4}, {12, 0, 0, 7, 0, 0, 0, 0}),
            (std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
  auto one_hot =
      lookup({1}, {{"vocabulary", kVocab}, {"mask_token", 0}, {"output_mode", "one_hot"}});
  EXPECT_EQ(run(*one_hot, {1}, {0, 36}), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(IntegerLookup, WithoutOovIndicesAnUnknownValueIsADataErrorNamingItsPlace) {
  auto strict = lookup({3}, {{"vocabulary", kVocab}, {"num_oov_indices", 0}});
  EXPECT_EQ(run(*strict, {3}, {12, 36, 42}), (std::vector<float>{0, 1, 3}));
  try {
    run(*strict, {3}, {12, 36, 42, 42, 1000, 36});
    ADD_FAILURE() << "1000 looked up";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "layer 'lookup' (IntegerLookup): input[1, 1] = 1000 is not in the vocabulary, "
                 "and num_oov_indices is 0 (Keras raises the same; give num_oov_indices 1 to map "
                 "such values to an index of their own)");
  }
}

TEST(IntegerLookup, NoGradientReachesTheInputAndTheConfigIsKeras) {
  const json model = json::parse(R"({"class_name": "Sequential", "config": {"name": "m",
    "layers": [{"class_name": "Dense", "config": {"name": "a", "units": 3, "input_shape": [2]}},
     {"class_name": "IntegerLookup", "config": {"name": "l", "vocabulary": [0, 1, 2],
      "output_mode": "count"}},
     {"class_name": "Dense", "config": {"name": "b", "units": 1}}]}})");
  auto m = Model::from_config(model, "model", 1);
  m->forward(test::random_tensor({4, 2}, 3), true);
  m->backward(test::random_tensor({4, 1}, 4));
  const auto params = m->parameters();
  for (std::int64_t i = 0; i < params[0]->grad.size(); ++i) EXPECT_EQ(params[0]->grad[i], 0.0f);

  auto l = lookup(
      {3}, {{"vocabulary", kVocab}, {"num_oov_indices", 2}, {"mask_token", 0}, {"max_tokens", 10}});
  const json written = l->config()["config"]["layers"][1]["config"];
  EXPECT_EQ(written["vocabulary"], kVocab);
  EXPECT_EQ(written["vocabulary_size"], 7);  // mask, 2 OOV indices, 4 values
  EXPECT_EQ(written["num_oov_indices"], 2);
  EXPECT_EQ(written["mask_token"], 0);
  EXPECT_EQ(written["oov_token"], -1);
  EXPECT_EQ(written["max_tokens"], 10);
  EXPECT_EQ(written["output_mode"], "int");
  EXPECT_EQ(written["invert"], false);
  EXPECT_EQ(written["vocabulary_dtype"], "int64");
  auto again = Model::from_config(l->config(), "model", 1);
  EXPECT_EQ(run(*again, {3}, {12, 0, 37}), run(*l, {3}, {12, 0, 37}));
}

TEST(IntegerLookup, BadSettingsAreRefusedAtTheirPath) {
  const std::string at = "'model.config.layers[1].config.";
  const struct {
    json config;
    std::string expected;
  } cases[] = {
      {json::object(), at + "vocabulary': null: the vocabulary is Keras' adapt()'s to compute"},
      {{{"vocabulary", "vocab.txt"}}, at + "vocabulary': expected a non-empty list of integers"},
      {{{"vocabulary", json::array()}}, at + "vocabulary': expected a non-empty list"},
      {{{"vocabulary", {1, 2.5}}}, at + "vocabulary[1]': expected an integer, got 2.5"},
      {{{"vocabulary", {1, 16777217}}}, at + "vocabulary[1]': 16777217 is beyond ±2^24"},
      {{{"vocabulary", {1, 2, 1, 3, 2}}}, at + "vocabulary': repeats 1, 2"},
      {{{"vocabulary", {5, 0}}, {"mask_token", 0}}, at + "vocabulary': holds the mask token 0"},
      {{{"vocabulary", {5, -1}}, {"invert", true}}, at + "vocabulary': holds the OOV token -1"},
      {{{"vocabulary", kVocab}, {"max_tokens", 4}},
       at + "vocabulary': makes 5 indices with the special ones, more than max_tokens 4"},
      {{{"vocabulary", kVocab}, {"max_tokens", 1}}, at + "max_tokens': must be greater than 1"},
      {{{"vocabulary", kVocab}, {"pad_to_max_tokens", true}}, at + "pad_to_max_tokens'"},
      {{{"vocabulary", kVocab}, {"invert", true}, {"output_mode", "one_hot"}}, at + "invert'"},
      {{{"vocabulary", kVocab}, {"output_mode", "tf_idf"}}, at + "idf_weights': required"},
      {{{"vocabulary", kVocab}, {"output_mode", "tf_idf"}, {"idf_weights", {1, 2}}},
       at + "idf_weights': expected a list of 4 numbers"},
      {{{"vocabulary", kVocab}, {"idf_weights", {1, 2, 3, 4}}}, at + "idf_weights': weighs"},
      {{{"vocabulary", kVocab}, {"output_mode", "count"}, {"sparse", true}},
       at + "sparse': Tandem's tensors are dense"},
      {{{"vocabulary", kVocab}, {"vocabulary_dtype", "string"}}, at + "vocabulary_dtype'"},
      {{{"vocabulary", kVocab}, {"output_mode", "embedding"}}, at + "output_mode'"},
      {{{"vocabulary", kVocab}, {"num_oov_indices", -1}}, at + "num_oov_indices'"},
      {{{"vocabulary", kVocab}, {"mask_token", "pad"}}, at + "mask_token': expected an integer"},
      {{{"vocabulary", kVocab}, {"vocabulary_size", 9}},
       at + "vocabulary_size': 9, but the vocabulary makes 5 indices"},
      {{{"vocabulary", kVocab}, {"vocabulary_file", "v.txt"}}, "vocabulary_file"},
  };
  for (const auto& c : cases) {
    const std::string error = config_error(c.config);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.config.dump() << "\n" << error;
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
