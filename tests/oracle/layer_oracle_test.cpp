// Layer, loss and optimizer oracle. Optimizers: Adagrad, Adadelta, Adamax, Nadam and Lion
// from their Keras configs, six steps on CPU over random gradients, against their Keras 3 rules
// written out in float32 PyTorch (and Adadelta also against torch.optim.Adadelta, the same
// rule): the weights' moves agree to 1e-4 of the largest move (a weight's own float rounding is
// ~1e-5 of such a move). Losses: each of Keras' losses built by Tandem from its config against
// its Keras 3 formula in PyTorch, on random predictions and targets from the loss' domain: the
// batch mean and its gradient, to the same bar.
//
// Layers: each layer of a functional model, built by Tandem from its Keras config, against
// the same layer written in PyTorch from Keras' documented semantics (keras_torch.py): the same
// weights and inputs (random, seeded), the output and the gradients of sum(y * dy) for a random
// dy with respect to every input and weight. Bar: max|tandem - torch| / max|torch| <= 1e-5 per
// tensor — except where a gradient is zero by symmetry (attention's key bias: the softmax
// cancels it), where both sides hold rounding noise: such a tensor (torch's largest value below
// 1e-6 of the case's largest gradient) must be that small in Tandem too. A negative control per
// run: a perturbed Tandem output must miss the bar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/layer_extensions.hpp"
#include "nn/layer_registry.hpp"
#include "nn/loss.hpp"
#include "optim/optimizer.hpp"
#include "tandem/layer.hpp"
#include "tandem/rng.hpp"
#include "test_support.hpp"
#include "util/config_object.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kBar = 1e-5;

struct Input {
  std::string name;   // "" for a plain input; the call argument's name otherwise
  Shape shape;        // with the batch axis
  bool mask = false;  // 0/1 values (an attention mask), else uniform in [-scale, scale]
  float scale = 1;
  float kept = 0.7f;  // a mask's share of ones
};

struct Case {
  std::string label;
  json layer;  // {"class_name": ..., "config": {...}}
  std::vector<Input> inputs;
  json options = json::object();  // the call's keyword options
  // Keras masks of the inputs' steps (batch x steps values, 0 or 1; empty for none), in the
  // inputs' order, given to a layer that reads masks (recurrent layers, attention).
  std::vector<std::vector<float>> masks = {};
  bool training = false;  // a training forward (BatchNormalization's batch statistics)
};

void write_floats(const fs::path& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(t.data()),
            static_cast<std::streamsize>(t.size() * sizeof(float)));
  ASSERT_TRUE(out.good()) << path;
}

std::vector<float> read_floats(const fs::path& path, std::int64_t count) {
  std::vector<float> v(static_cast<std::size_t>(count));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  EXPECT_EQ(in.gcount(), static_cast<std::streamsize>(count * sizeof(float))) << path;
  return v;
}

Tensor random_tensor(const Shape& shape, Rng& rng, bool mask, float scale = 1, float kept = 0.7f) {
  Tensor t(shape);
  for (std::int64_t i = 0; i < t.size(); ++i)
    t[i] = mask ? (rng.uniform() < kept ? 1.0f : 0.0f)
                : scale * static_cast<float>(2 * rng.uniform() - 1);
  return t;
}

// How many rows of the last axis of `mask` are all zeros.
std::int64_t zero_rows(const Tensor& mask) {
  const std::int64_t cols = mask.shape().back();
  std::int64_t count = 0;
  for (std::int64_t r = 0; r < mask.size() / cols; ++r)
    count += std::all_of(mask.data() + r * cols, mask.data() + (r + 1) * cols,
                         [](float v) { return v == 0.0f; });
  return count;
}

// max|a - b| / max|b| (b the reference).
double relative_error(const Tensor& actual, const std::vector<float>& reference) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    diff = std::max(
        diff, std::fabs(static_cast<double>(actual[static_cast<std::int64_t>(i)]) - reference[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(reference[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// prefix + i + suffix ("in3.bin"), built by appending (GCC 12 misjudges "in" + s as an
// overlapping copy).
std::string numbered(const char* prefix, std::size_t i, const char* suffix = "") {
  std::string s(prefix);
  s.append(std::to_string(i)).append(suffix);
  return s;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

double max_abs(const Tensor& t) {
  return max_abs(std::vector<float>(t.data(), t.data() + t.size()));
}

std::unique_ptr<Layer> make(const json& entry) {
  return test::make_layer(entry.at("class_name").get<std::string>(), entry.at("config"));
}

// One case run through Tandem, its inputs, weights and results written for keras_torch.py.
struct Ran {
  Case c;
  std::unique_ptr<Layer> layer;
  std::vector<Tensor> inputs;
  Tensor y, dy;
  std::vector<Tensor> grads;  // copies: a layer may hand back dy itself, or its own buffers
  fs::path dir;
};

Ran run_in_tandem(const Case& c) {
  Ran run{c, make(c.layer), {}, {}, {}, {}, test::scratch_dir("layer-oracle-" + c.label)};
  Layer& layer = *run.layer;
  std::vector<std::string> names;
  for (std::size_t i = 1; i < c.inputs.size(); ++i) names.push_back(c.inputs[i].name);
  if (auto* arguments = nn::call_arguments_of(layer))
    arguments->set_call_arguments(names, c.options, "call");
  Rng rng(20261124);
  std::vector<Shape> shapes;
  for (const auto& in : c.inputs) {
    shapes.push_back(Shape(in.shape.begin() + 1, in.shape.end()));
    run.inputs.push_back(random_tensor(in.shape, rng, in.mask, in.scale, in.kept));
  }
  Rng init(7);
  layer.build_inputs(shapes, init);
  // Weights drawn afresh (not the initializer's), so every parameter matters; variances (an
  // adapted Normalization's statistics) are not negative.
  for (Parameter* p : layer.parameters()) {
    p->value = random_tensor(p->value.shape(), rng, false);
    if (p->name == "variance")
      for (std::int64_t i = 0; i < p->value.size(); ++i) p->value[i] = std::fabs(p->value[i]);
  }
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : run.inputs) pointers.push_back(&t);
  std::vector<Tensor> masks(c.masks.size());
  std::vector<const Tensor*> mask_pointers(c.inputs.size(), nullptr);
  for (std::size_t i = 0; i < c.masks.size(); ++i)
    if (!c.masks[i].empty()) {
      const Shape& shape = c.inputs[i].shape;
      masks[i] = Tensor::from_vector({shape[0], shape[1]}, c.masks[i]);
      mask_pointers[i] = &masks[i];
    }
  if (!c.masks.empty()) {
    nn::MaskedSteps* masked = nn::masked_steps_of(layer);
    EXPECT_NE(masked, nullptr) << c.label << ": the layer reads no mask";
    if (masked) masked->set_input_masks(mask_pointers);
  }
  run.y = layer.forward_inputs(pointers, c.training).clone();
  run.dy = random_tensor(run.y.shape(), rng, false);
  for (const Tensor* g : layer.backward_inputs(run.dy, true)) run.grads.push_back(g->clone());

  json manifest{{"class_name", c.layer["class_name"]},
                {"config", c.layer["config"]},
                {"options", c.options},
                {"training", c.training},
                {"inputs", json::array()},
                {"weights", json::array()}};
  for (std::size_t i = 0; i < run.inputs.size(); ++i) {
    const std::string file = numbered("in", i, ".bin");
    write_floats(run.dir / file, run.inputs[i]);
    // The first input is the query for attention; the others are named by their argument, one
    // given several tensors (initial_state) numbered from 0.
    std::string name = !c.inputs[i].name.empty() ? c.inputs[i].name
                       : i == 0                  ? "query"
                                                 : numbered("x", i);
    const auto same = [&](const Input& in) { return in.name == c.inputs[i].name; };
    if (!c.inputs[i].name.empty() && std::count_if(c.inputs.begin(), c.inputs.end(), same) > 1)
      name = numbered(name.c_str(), static_cast<std::size_t>(std::count_if(
                                        c.inputs.begin(), c.inputs.begin() + i, same)));
    manifest["inputs"].push_back(
        {{"name", name}, {"file", file}, {"shape", run.inputs[i].shape()}});
  }
  const auto params = layer.parameters();
  for (std::size_t j = 0; j < params.size(); ++j) {
    const std::string file = numbered("w", j, ".bin");
    write_floats(run.dir / file, params[j]->value);
    manifest["weights"].push_back(
        {{"name", params[j]->name}, {"file", file}, {"shape", params[j]->value.shape()}});
  }
  manifest["masks"] = json::array();
  for (std::size_t i = 0; i < masks.size(); ++i)
    if (mask_pointers[i]) {
      const std::string file = numbered("mask", i, ".bin");
      write_floats(run.dir / file, masks[i]);
      manifest["masks"].push_back(
          {{"name", manifest["inputs"][i]["name"]}, {"file", file}, {"shape", masks[i].shape()}});
    }
  write_floats(run.dir / "dy.bin", run.dy);
  manifest["grad_output"] = {{"file", "dy.bin"}, {"shape", run.dy.shape()}};
  test::write_text(run.dir / "case.json", manifest.dump(2));
  return run;
}

void compare_with_torch(const Ran& run) {
  SCOPED_TRACE(run.c.label);
  ASSERT_EQ(run.grads.size(), run.inputs.size());
  const fs::path& dir = run.dir;
  EXPECT_LE(relative_error(run.y, read_floats(dir / "y.bin", run.y.size())), kBar) << "output";
  for (std::size_t i = 0; i < run.inputs.size(); ++i)
    EXPECT_LE(relative_error(run.grads[i], read_floats(dir / numbered("dinput", i, ".bin"),
                                                       run.inputs[i].size())),
              kBar)
        << "gradient of input " << i;
  const auto params = run.layer->parameters();
  std::vector<std::vector<float>> weight_grads;
  double largest = 0;
  for (std::size_t j = 0; j < params.size(); ++j) {
    weight_grads.push_back(
        read_floats(dir / numbered("dweight", j, ".bin"), params[j]->value.size()));
    largest = std::max(largest, max_abs(weight_grads.back()));
  }
  for (std::size_t j = 0; j < params.size(); ++j) {
    if (!params[j]->trainable) continue;              // statistics: no gradient, in Keras neither
    if (max_abs(weight_grads[j]) < 1e-6 * largest) {  // zero by symmetry: rounding noise
      EXPECT_LE(max_abs(params[j]->grad), 1e-5 * largest) << "gradient of " << params[j]->name;
      continue;
    }
    EXPECT_LE(relative_error(params[j]->grad, weight_grads[j]), kBar)
        << "gradient of " << params[j]->name;
  }
  // Negative control: one output value off by 1e-3 of the output's scale must miss the bar.
  Tensor off = run.y.clone();
  off[off.size() / 2] += static_cast<float>(1e-3 * std::max(1.0, max_abs(run.y)));
  EXPECT_GT(relative_error(off, read_floats(dir / "y.bin", run.y.size())), kBar);
}

// Runs every case in Tandem, then all of them in one PyTorch process (torch's start-up is about
// a second), then compares.
void check_against_torch(const std::vector<Case>& cases) {
  std::vector<Ran> runs;
  std::string command = std::string(test::system_python()) + " " +
                        (test::source_dir() / "tests/oracle/keras_torch.py").string();
  for (const Case& c : cases) {
    runs.push_back(run_in_tandem(c));
    command.append(" ").append(runs.back().dir.string());
  }
  const auto r = test::run_command(command);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const Ran& run : runs) compare_with_torch(run);
}

json entry(const std::string& cls, json config = json::object()) {
  config["name"] = "layer_under_test";
  return {{"class_name", cls}, {"config", config}};
}

TEST(LayerOracle, MergingLayersMatchPyTorch) {
  std::vector<Case> cases;
  for (const char* cls : {"Add", "Multiply", "Average", "Maximum", "Minimum"})
    cases.push_back({cls, entry(cls), {{"", {3, 4, 5}}, {"", {3, 4, 5}}, {"", {3, 4, 5}}}});
  cases.push_back({"Subtract", entry("Subtract"), {{"", {3, 7}}, {"", {3, 7}}}});
  cases.push_back({"DotVectors", entry("Dot", {{"axes", -1}}), {{"", {3, 7}}, {"", {3, 7}}}});
  // normalize: cosine proximity (torch.nn.functional.normalize on each input first).
  cases.push_back({"DotCosineVectors",
                   entry("Dot", {{"axes", 1}, {"normalize", true}}),
                   {{"", {3, 7}}, {"", {3, 7}}}});
  cases.push_back({"DotCosineMixed",
                   entry("Dot", {{"axes", {1, 2}}, {"normalize", true}}),
                   {{"", {2, 4, 5}}, {"", {2, 3, 4}}}});
  cases.push_back({"DotLastAxes", entry("Dot", {{"axes", 2}}), {{"", {2, 4, 5}}, {"", {2, 3, 5}}}});
  cases.push_back(
      {"DotFirstAxes", entry("Dot", {{"axes", 1}}), {{"", {2, 4, 5}}, {"", {2, 4, 3}}}});
  cases.push_back(
      {"DotMixed", entry("Dot", {{"axes", {2, 1}}}), {{"", {2, 4, 5}}, {"", {2, 5, 3}}}});
  cases.push_back(
      {"DotMixedOther", entry("Dot", {{"axes", {1, 2}}}), {{"", {2, 4, 5}}, {"", {2, 3, 4}}}});
  cases.push_back(
      {"Concatenate", entry("Concatenate", {{"axis", 1}}), {{"", {2, 3, 4}}, {"", {2, 5, 4}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, LayerNormalizationMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back(
      {"LayerNormalization", entry("LayerNormalization", {{"epsilon", 1e-3}}), {{"", {4, 6, 16}}}});
  cases.push_back({"LayerNormalizationNoCenter",
                   entry("LayerNormalization", {{"center", false}, {"epsilon", 1e-5}}),
                   {{"", {5, 8}}}});
  // Keras' rms_scaling: the deviation about the mean, the mean left in the output.
  cases.push_back({"LayerNormalizationRmsScaling",
                   entry("LayerNormalization", {{"rms_scaling", true}, {"epsilon", 1e-3}}),
                   {{"", {4, 6, 16}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, RmsNormalizationMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"RmsNormalization", entry("RMSNormalization"), {{"", {4, 6, 16}}}});
  cases.push_back(
      {"RmsNormalizationEpsilon", entry("RMSNormalization", {{"epsilon", 0.5}}), {{"", {5, 7}}}});
  check_against_torch(cases);
}

// GroupedQueryAttention: 4 query heads over 2 key/value heads (and over 1: multi-query), cross
// attention with a key of its own, causal self-attention, an attention_mask without biases.
TEST(LayerOracle, GroupedQueryAttentionMatchesPyTorch) {
  const auto gqa = [](int query_heads, int kv_heads, int head_dim, json extra = json::object()) {
    extra["num_query_heads"] = query_heads;
    extra["num_key_value_heads"] = kv_heads;
    extra["head_dim"] = head_dim;
    return entry("GroupedQueryAttention", extra);
  };
  std::vector<Case> cases;
  cases.push_back({"GqaSelf", gqa(4, 2, 3), {{"", {3, 5, 6}}, {"value", {3, 5, 6}}}});
  cases.push_back({"GqaMultiQueryCross",
                   gqa(3, 1, 2),
                   {{"", {2, 4, 6}}, {"value", {2, 3, 6}}, {"key", {2, 3, 8}}}});
  cases.push_back({"GqaCausal",
                   gqa(4, 2, 2),
                   {{"", {2, 5, 4}}, {"value", {2, 5, 4}}},
                   {{"use_causal_mask", true}}});
  cases.push_back({"GqaMaskNoBias",
                   gqa(6, 3, 2, {{"use_bias", false}}),
                   {{"", {2, 4, 4}}, {"value", {2, 6, 4}}, {"attention_mask", {2, 4, 6}, true}},
                   {{"use_causal_mask", false}}});
  check_against_torch(cases);
}

TEST(LayerOracle, MultiHeadAttentionMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"MhaSelf",
                   entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 4}}),
                   {{"", {3, 5, 6}}, {"value", {3, 5, 6}}}});
  cases.push_back({"MhaCross",
                   entry("MultiHeadAttention",
                         {{"num_heads", 3}, {"key_dim", 2}, {"value_dim", 5}, {"output_shape", 7}}),
                   {{"", {2, 4, 6}}, {"value", {2, 3, 5}}, {"key", {2, 3, 8}}}});
  cases.push_back({"MhaCausal",
                   entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 3}}),
                   {{"", {2, 5, 4}}, {"value", {2, 5, 4}}},
                   {{"use_causal_mask", true}}});
  cases.push_back(
      {"MhaMaskNoBias",
       entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 3}, {"use_bias", false}}),
       {{"", {2, 4, 4}}, {"value", {2, 6, 4}}, {"attention_mask", {2, 4, 6}, true}},
       {{"use_causal_mask", false}}});
  check_against_torch(cases);
}

// A query whose keys the mask hides every one of: Keras 3 attends uniformly without dropout
// (its fused dot_product_attention) and to nothing with dropout (its masked softmax), neither
// passing a gradient to the scores. A mask of 30% ones over 3 keys hides whole rows.
TEST(LayerOracle, MultiHeadAttentionQueriesThatSeeNoKeyAreKeras3s) {
  std::vector<Case> cases;
  const std::vector<Input> inputs{
      {"", {3, 4, 4}}, {"value", {3, 3, 4}}, {"attention_mask", {3, 4, 3}, true, 1, 0.3f}};
  cases.push_back({"MhaHiddenRowsFused",
                   entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 3}}), inputs});
  cases.push_back(
      {"MhaHiddenRowsDropout",
       entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 3}, {"dropout", 0.25}}), inputs});
  cases.push_back(
      {"MhaHiddenRowsCausal",
       entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 3}}),
       {{"", {3, 4, 4}}, {"value", {3, 4, 4}}, {"attention_mask", {3, 4, 4}, true, 1, 0.4f}},
       {{"use_causal_mask", true}}});
  check_against_torch(cases);
  // The cases do hold such rows (Rng's draws are fixed): a mask row of zeros.
  const Ran fused = run_in_tandem(cases[0]);
  EXPECT_GE(zero_rows(fused.inputs[2]), 2);
}

// The 1-D convolutions (Conv1D, DepthwiseConv1D, SeparableConv1D: valid, same, causal, strided,
// dilated), the 1-D and global pooling layers.
TEST(LayerOracle, SequenceAndGlobalPoolingLayersMatchPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"Conv1DValid",
                   entry("Conv1D", {{"filters", 5}, {"kernel_size", 3}, {"activation", "tanh"}}),
                   {{"", {2, 9, 4}}}});
  cases.push_back(
      {"Conv1DSameStrided",
       entry("Conv1D", {{"filters", 3}, {"kernel_size", {4}}, {"strides", 2}, {"padding", "same"}}),
       {{"", {2, 9, 4}}}});
  cases.push_back({"Conv1DDilated",
                   entry("Conv1D", {{"filters", 3},
                                    {"kernel_size", 3},
                                    {"dilation_rate", 2},
                                    {"padding", "same"},
                                    {"use_bias", false}}),
                   {{"", {2, 10, 2}}}});
  cases.push_back(
      {"Conv1DCausalDilated",
       entry("Conv1D",
             {{"filters", 3}, {"kernel_size", 3}, {"dilation_rate", 2}, {"padding", "causal"}}),
       {{"", {2, 9, 4}}}});
  cases.push_back({"Conv1DCausalStrided",
                   entry("Conv1D", {{"filters", 2},
                                    {"kernel_size", 4},
                                    {"strides", 3},
                                    {"padding", "causal"},
                                    {"activation", "relu"}}),
                   {{"", {2, 10, 3}}}});
  cases.push_back({"DepthwiseConv1DSameMultiplied",
                   entry("DepthwiseConv1D", {{"kernel_size", 3},
                                             {"depth_multiplier", 2},
                                             {"padding", "same"},
                                             {"activation", "relu"}}),
                   {{"", {2, 9, 3}}}});
  cases.push_back({"DepthwiseConv1DCausalDilated",
                   entry("DepthwiseConv1D", {{"kernel_size", {2}},
                                             {"dilation_rate", 3},
                                             {"padding", "causal"},
                                             {"use_bias", false}}),
                   {{"", {2, 10, 4}}}});
  cases.push_back({"SeparableConv1DValidStrided",
                   entry("SeparableConv1D", {{"filters", 5},
                                             {"kernel_size", 3},
                                             {"strides", 2},
                                             {"depth_multiplier", 2},
                                             {"activation", "tanh"}}),
                   {{"", {2, 11, 3}}}});
  cases.push_back(
      {"SeparableConv1DCausal",
       entry("SeparableConv1D", {{"filters", 4}, {"kernel_size", 4}, {"padding", "causal"}}),
       {{"", {2, 8, 2}}}});
  cases.push_back({"MaxPooling1D",
                   entry("MaxPooling1D", {{"pool_size", 3}, {"strides", 2}}),
                   {{"", {2, 11, 3}}}});
  cases.push_back(
      {"AveragePooling1D", entry("AveragePooling1D", {{"pool_size", 2}}), {{"", {2, 8, 3}}}});
  cases.push_back({"GlobalMaxPooling1D", entry("GlobalMaxPooling1D"), {{"", {3, 7, 4}}}});
  cases.push_back({"GlobalMaxPooling2D",
                   entry("GlobalMaxPooling2D", {{"keepdims", true}}),
                   {{"", {2, 4, 5, 3}}}});
  check_against_torch(cases);
}

// Keras 3's adaptive poolings against torch's: windows that overlap (7 to 3, 5 to 4), that
// divide (8 to 4), that grow (3 to 5: cells read twice), over steps, images and volumes.
TEST(LayerOracle, AdaptivePoolingMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"AdaptiveAveragePooling1D",
                   entry("AdaptiveAveragePooling1D", {{"output_size", 3}}),
                   {{"", {2, 7, 3}}}});
  cases.push_back({"AdaptiveMaxPooling1D",
                   entry("AdaptiveMaxPooling1D", {{"output_size", 5}}),
                   {{"", {2, 3, 4}}}});
  cases.push_back({"AdaptiveAveragePooling2D",
                   entry("AdaptiveAveragePooling2D", {{"output_size", {3, 4}}}),
                   {{"", {2, 7, 5, 3}}}});
  cases.push_back({"AdaptiveMaxPooling2D",
                   entry("AdaptiveMaxPooling2D", {{"output_size", {4, 3}}}),
                   {{"", {2, 8, 7, 2}}}});
  cases.push_back({"AdaptiveAveragePooling3D",
                   entry("AdaptiveAveragePooling3D", {{"output_size", {2, 3, 2}}}),
                   {{"", {2, 3, 5, 4, 2}}}});
  cases.push_back({"AdaptiveMaxPooling3D",
                   entry("AdaptiveMaxPooling3D", {{"output_size", 2}}),
                   {{"", {2, 5, 3, 4, 2}}}});
  check_against_torch(cases);
}

// The volume layers (Conv3D valid, same and strided, dilated with groups; the 3-D pooling with
// "valid" and asymmetric "same" windows; the global pooling over a volume's cells; padding,
// cropping and upsampling with different amounts along each axis).
TEST(LayerOracle, VolumeLayersMatchPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"Conv3DValid",
                   entry("Conv3D", {{"filters", 4}, {"kernel_size", 3}, {"activation", "tanh"}}),
                   {{"", {2, 5, 6, 7, 3}}}});
  cases.push_back({"Conv3DSameStrided",
                   entry("Conv3D", {{"filters", 3},
                                    {"kernel_size", {2, 3, 3}},
                                    {"strides", {2, 1, 2}},
                                    {"padding", "same"},
                                    {"activation", "relu"}}),
                   {{"", {2, 5, 6, 7, 2}}}});
  cases.push_back({"Conv3DDilatedGrouped",
                   entry("Conv3D", {{"filters", 4},
                                    {"kernel_size", {2, 2, 3}},
                                    {"dilation_rate", {2, 1, 2}},
                                    {"groups", 2},
                                    {"padding", "same"},
                                    {"use_bias", false}}),
                   {{"", {2, 6, 5, 7, 4}}}});
  cases.push_back({"MaxPooling3D", entry("MaxPooling3D"), {{"", {2, 5, 6, 7, 3}}}});
  cases.push_back({"MaxPooling3DSame",
                   entry("MaxPooling3D",
                         {{"pool_size", {3, 2, 2}}, {"strides", {2, 2, 1}}, {"padding", "same"}}),
                   {{"", {2, 5, 6, 5, 2}}}});
  cases.push_back({"AveragePooling3DSame",
                   entry("AveragePooling3D",
                         {{"pool_size", {2, 3, 3}}, {"strides", {1, 2, 2}}, {"padding", "same"}}),
                   {{"", {2, 4, 5, 7, 3}}}});
  cases.push_back({"GlobalAveragePooling3D",
                   entry("GlobalAveragePooling3D", {{"keepdims", true}}),
                   {{"", {2, 3, 4, 5, 3}}}});
  cases.push_back({"GlobalMaxPooling3D", entry("GlobalMaxPooling3D"), {{"", {2, 3, 4, 5, 3}}}});
  cases.push_back({"Conv3DTransposeSame",
                   entry("Conv3DTranspose", {{"filters", 3},
                                             {"kernel_size", {2, 3, 3}},
                                             {"strides", {1, 2, 2}},
                                             {"padding", "same"},
                                             {"activation", "tanh"}}),
                   {{"", {2, 3, 4, 3, 2}}}});
  cases.push_back({"Conv3DTransposeValidOutputPadding",
                   entry("Conv3DTranspose", {{"filters", 2},
                                             {"kernel_size", 3},
                                             {"strides", {2, 3, 2}},
                                             {"output_padding", {1, 2, 0}}}),
                   {{"", {2, 3, 2, 3, 3}}}});
  cases.push_back({"Conv3DTransposeDilated",
                   entry("Conv3DTranspose", {{"filters", 2},
                                             {"kernel_size", {2, 2, 3}},
                                             {"dilation_rate", {2, 1, 2}},
                                             {"padding", "same"},
                                             {"use_bias", false}}),
                   {{"", {2, 4, 3, 5, 2}}}});
  cases.push_back({"ZeroPadding3D",
                   entry("ZeroPadding3D", {{"padding", {{1, 0}, {0, 2}, {2, 1}}}}),
                   {{"", {2, 3, 4, 2, 3}}}});
  cases.push_back({"Cropping3D",
                   entry("Cropping3D", {{"cropping", {{1, 2}, {0, 1}, {2, 0}}}}),
                   {{"", {2, 5, 4, 6, 2}}}});
  cases.push_back(
      {"UpSampling3D", entry("UpSampling3D", {{"size", {2, 1, 3}}}), {{"", {2, 3, 4, 2, 3}}}});
  check_against_torch(cases);
}

// Keras' RNN over each of its cells (an LSTMCell named as Keras numbers a second one, a GRUCell
// with the reset gate before its product going backwards, a SimpleRNNCell with relu): the cell's
// layer computed by torch, the cell's weights; over StackedRNNCells (an LSTMCell under a
// GRUCell; every step; going backwards over masked steps), Keras' loop stepped by hand, each
// cell on the step's output of the one below.
TEST(LayerOracle, RnnOverACellMatchesPyTorch) {
  auto rnn = [](const char* cell, json cell_config, json flags) {
    json config = std::move(flags);
    config["cell"] = {{"class_name", cell}, {"config", std::move(cell_config)}};
    return entry("RNN", config);
  };
  std::vector<Case> cases;
  cases.push_back(
      {"RnnLstmCell",
       rnn("LSTMCell", {{"name", "lstm_cell_1"}, {"units", 4}}, {{"return_sequences", true}}),
       {{"", {2, 5, 3}}}});
  cases.push_back({"RnnGruCellResetBeforeBackwards",
                   rnn("GRUCell", {{"units", 3}, {"reset_after", false}}, {{"go_backwards", true}}),
                   {{"", {2, 4, 3}}}});
  cases.push_back(
      {"RnnSimpleRnnCellRelu",
       rnn("SimpleRNNCell", {{"units", 5}, {"activation", "relu"}}, {{"return_sequences", true}}),
       {{"", {3, 4, 2}}}});
  const json stacked = {
      {"class_name", "StackedRNNCells"},
      {"config",
       {{"cells",
         {{{"class_name", "LSTMCell"}, {"config", {{"name", "lstm_cell"}, {"units", 4}}}},
          {{"class_name", "GRUCell"}, {"config", {{"name", "gru_cell"}, {"units", 3}}}}}}}}};
  cases.push_back({"RnnStackedCells",
                   entry("RNN", {{"cell", stacked}, {"return_sequences", true}}),
                   {{"", {2, 5, 3}}}});
  cases.push_back({"RnnStackedCellsBackwardsMasked",
                   entry("RNN", {{"cell", stacked}, {"go_backwards", true}}),
                   {{"", {3, 5, 3}}},
                   json::object(),
                   {{1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1}}});
  check_against_torch(cases);
}

// Keras' EinsumDense over the equations of MultiHeadAttention's projections, an ellipsis on
// either side, an axis of all three operands, permuted inputs, kernels and outputs (with a
// softmax over an axis the product moved): torch.einsum of the same equation.
TEST(LayerOracle, EinsumDenseMatchesTorchEinsum) {
  auto einsum = [](const char* equation, json output_shape, json bias_axes, const char* act) {
    return entry("EinsumDense", {{"equation", equation},
                                 {"output_shape", std::move(output_shape)},
                                 {"bias_axes", std::move(bias_axes)},
                                 {"activation", act}});
  };
  std::vector<Case> cases;
  cases.push_back({"EinsumDenseHeads",
                   einsum("abc,cde->abde", {nullptr, 2, 3}, "de", "tanh"),
                   {{"", {2, 4, 5}}}});
  cases.push_back({"EinsumDenseFromHeads",
                   einsum("abcd,cde->abe", {nullptr, 6}, "e", "linear"),
                   {{"", {2, 4, 2, 3}}}});
  cases.push_back(
      {"EinsumDenseShared", einsum("abc,bcd->abd", {4, 3}, "d", "relu"), {{"", {3, 4, 5}}}});
  cases.push_back({"EinsumDenseLeftEllipsis",
                   einsum("...b,bc->...c", {5}, "c", "sigmoid"),
                   {{"", {2, 3, 4, 6}}}});
  cases.push_back({"EinsumDenseRightEllipsis",
                   einsum("ab...,bc->ac...", {3}, "c", "linear"),
                   {{"", {2, 4, 2, 5}}}});
  cases.push_back({"EinsumDensePermutedSoftmax",
                   einsum("abc,cd->adb", {4, 3}, "b", "softmax"),
                   {{"", {2, 3, 5}}}});
  cases.push_back({"EinsumDensePermutedInput",
                   einsum("abc,bd->adc", {5, 3}, "dc", "linear"),
                   {{"", {2, 4, 3}}}});
  cases.push_back({"EinsumDenseKernelReversed",
                   einsum("abcd,edc->abe", {nullptr, 4}, "e", "linear"),
                   {{"", {2, 3, 2, 5}}}});
  cases.push_back({"EinsumDenseNoBias",
                   einsum("abcd,de->aecb", {6, 3, 2}, nullptr, "gelu"),
                   {{"", {2, 2, 3, 4}}}});
  check_against_torch(cases);
}

// Keras' convolutional LSTMs: ConvLSTM2D valid and same, strided, every step or the last,
// go_backwards; ConvLSTM1D; ConvLSTM3D; with return_state the final h and c after the output;
// outputs and every gradient through the steps (the states' own included).
TEST(LayerOracle, ConvLstmMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"ConvLSTM2DSequences",
                   entry("ConvLSTM2D", {{"filters", 3},
                                        {"kernel_size", 3},
                                        {"padding", "same"},
                                        {"return_sequences", true}}),
                   {{"", {2, 4, 5, 6, 2}}}});
  cases.push_back({"ConvLSTM2DValidStridedBackwards",
                   entry("ConvLSTM2D", {{"filters", 2},
                                        {"kernel_size", {2, 3}},
                                        {"strides", {1, 2}},
                                        {"go_backwards", true},
                                        {"unit_forget_bias", false},
                                        {"bias_initializer", "random_normal"}}),
                   {{"", {2, 3, 5, 7, 3}}}});
  cases.push_back({"ConvLSTM2DBackwardsSequencesNoBias",
                   entry("ConvLSTM2D", {{"filters", 2},
                                        {"kernel_size", 2},
                                        {"padding", "same"},
                                        {"use_bias", false},
                                        {"go_backwards", true},
                                        {"return_sequences", true},
                                        {"activation", "relu"}}),
                   {{"", {2, 3, 4, 3, 2}}}});
  cases.push_back({"ConvLSTM1DDilated",
                   entry("ConvLSTM1D", {{"filters", 3},
                                        {"kernel_size", 3},
                                        {"dilation_rate", 2},
                                        {"padding", "same"},
                                        {"return_sequences", true}}),
                   {{"", {2, 4, 9, 2}}}});
  cases.push_back({"ConvLSTM3D",
                   entry("ConvLSTM3D", {{"filters", 2}, {"kernel_size", 2}, {"padding", "same"}}),
                   {{"", {2, 3, 3, 4, 3, 2}}}});
  cases.push_back({"ConvLSTM2DFinalStates",
                   entry("ConvLSTM2D", {{"filters", 2},
                                        {"kernel_size", 3},
                                        {"padding", "same"},
                                        {"return_sequences", true},
                                        {"return_state", true}}),
                   {{"", {2, 3, 4, 5, 2}}}});
  cases.push_back(
      {"ConvLSTM1DFinalStatesBackwards",
       entry("ConvLSTM1D",
             {{"filters", 3}, {"kernel_size", 2}, {"go_backwards", true}, {"return_state", true}}),
       {{"", {2, 4, 6, 2}}}});
  // From given states (initial_state): h and c of the output grid, their gradients included.
  cases.push_back(
      {"ConvLSTM2DFromGivenStates",
       entry("ConvLSTM2D", {{"filters", 3},
                            {"kernel_size", 3},
                            {"padding", "same"},
                            {"return_sequences", true},
                            {"return_state", true}}),
       {{"", {2, 3, 4, 5, 2}}, {"initial_state", {2, 4, 5, 3}}, {"initial_state", {2, 4, 5, 3}}}});
  cases.push_back(
      {"ConvLSTM1DValidBackwardsFromGivenStates",
       entry("ConvLSTM1D", {{"filters", 2}, {"kernel_size", 3}, {"go_backwards", true}}),
       {{"", {2, 4, 7, 2}}, {"initial_state", {2, 5, 2}}, {"initial_state", {2, 5, 2}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, ResizingMatchesPyTorch) {
  std::vector<Case> cases;
  // Resizing: tf.image.resize (half-pixel centres) against torch's interpolate of the same
  // definition (bilinear without align_corners, nearest-exact), up and down, the centred window
  // of crop_to_aspect_ratio; the gradients spread back through the same weights. CenterCrop, which
  // is a crop or such a resize.
  cases.push_back({"ResizingBilinearUp",
                   entry("Resizing", {{"height", 7}, {"width", 9}}),
                   {{"", {2, 4, 5, 3}}}});
  cases.push_back({"ResizingBilinearDownCropped",
                   entry("Resizing", {{"height", 3}, {"width", 2}, {"crop_to_aspect_ratio", true}}),
                   {{"", {2, 7, 8, 2}}}});
  cases.push_back({"ResizingNearestUpAndDown",
                   entry("Resizing", {{"height", 7}, {"width", 3}, {"interpolation", "nearest"}}),
                   {{"", {2, 4, 5, 2}}}});
  cases.push_back(
      {"ResizingPaddedToAspectRatio",
       entry("Resizing",
             {{"height", 4}, {"width", 6}, {"pad_to_aspect_ratio", true}, {"fill_value", 0.75}}),
       {{"", {2, 5, 3, 2}}}});
  cases.push_back({"ResizingNearestPaddedRows",
                   entry("Resizing", {{"height", 5},
                                      {"width", 2},
                                      {"pad_to_aspect_ratio", true},
                                      {"interpolation", "nearest"}}),
                   {{"", {2, 3, 4, 2}}}});
  // CenterCrop: the centred window (odd and even margins), or smart_resize where the image is
  // smaller than the target along an axis.
  cases.push_back({"CenterCropWindow",
                   entry("CenterCrop", {{"height", 3}, {"width", 2}}),
                   {{"", {2, 6, 5, 3}}}});
  cases.push_back({"CenterCropSmallerResizes",
                   entry("CenterCrop", {{"height", 6}, {"width", 3}}),
                   {{"", {2, 4, 7, 2}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, Conv2DTransposeMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"Conv2DTransposeValidStrided",
                   entry("Conv2DTranspose", {{"filters", 4}, {"kernel_size", 3}, {"strides", 2}}),
                   {{"", {2, 4, 5, 3}}}});
  cases.push_back({"Conv2DTransposeSameStrided",
                   entry("Conv2DTranspose", {{"filters", 2},
                                             {"kernel_size", {3, 2}},
                                             {"strides", {2, 3}},
                                             {"padding", "same"},
                                             {"activation", "tanh"}}),
                   {{"", {2, 3, 4, 5}}}});
  cases.push_back({"Conv2DTransposeEvenKernelSame",
                   entry("Conv2DTranspose", {{"filters", 3},
                                             {"kernel_size", 4},
                                             {"strides", 2},
                                             {"padding", "same"},
                                             {"activation", "relu"}}),
                   {{"", {2, 4, 4, 2}}}});
  cases.push_back({"Conv2DTransposeOutputPadding",
                   entry("Conv2DTranspose", {{"filters", 3},
                                             {"kernel_size", 3},
                                             {"strides", 2},
                                             {"padding", "same"},
                                             {"output_padding", {1, 0}}}),
                   {{"", {2, 3, 4, 2}}}});
  cases.push_back({"Conv2DTransposeValidOutputPadding",
                   entry("Conv2DTranspose", {{"filters", 2},
                                             {"kernel_size", 2},
                                             {"strides", 3},
                                             {"output_padding", 2},
                                             {"use_bias", false}}),
                   {{"", {2, 3, 3, 2}}}});
  cases.push_back(
      {"Conv2DTransposeDilated",
       entry("Conv2DTranspose",
             {{"filters", 2}, {"kernel_size", 3}, {"dilation_rate", 2}, {"padding", "same"}}),
       {{"", {2, 5, 6, 3}}}});
  // Conv1DTranspose: the same arithmetic along the steps (keras.io's time-series autoencoder
  // decodes with it), kernel (k, filters, in).
  cases.push_back({"Conv1DTransposeSameStrided",
                   entry("Conv1DTranspose", {{"filters", 3},
                                             {"kernel_size", 7},
                                             {"strides", 2},
                                             {"padding", "same"},
                                             {"activation", "relu"}}),
                   {{"", {2, 9, 4}}}});
  cases.push_back({"Conv1DTransposeValidOutputPadding",
                   entry("Conv1DTranspose", {{"filters", 2},
                                             {"kernel_size", {3}},
                                             {"strides", {3}},
                                             {"output_padding", {2}},
                                             {"use_bias", false}}),
                   {{"", {2, 5, 3}}}});
  cases.push_back({"Conv1DTransposeDilated",
                   entry("Conv1DTranspose", {{"filters", 2},
                                             {"kernel_size", 3},
                                             {"dilation_rate", 2},
                                             {"padding", "same"},
                                             {"activation", "tanh"}}),
                   {{"", {2, 8, 3}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, GroupedDepthwiseAndSeparableConvolutionsMatchPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"Conv2DGroups",
                   entry("Conv2D", {{"filters", 6},
                                    {"kernel_size", 3},
                                    {"groups", 2},
                                    {"padding", "same"},
                                    {"activation", "tanh"}}),
                   {{"", {2, 5, 4, 4}}}});
  cases.push_back(
      {"DepthwiseConv2D", entry("DepthwiseConv2D", {{"kernel_size", 3}}), {{"", {2, 5, 6, 3}}}});
  cases.push_back({"DepthwiseConv2DMultiplierStridedSame",
                   entry("DepthwiseConv2D", {{"kernel_size", {3, 2}},
                                             {"strides", 2},
                                             {"padding", "same"},
                                             {"depth_multiplier", 2},
                                             {"activation", "relu"}}),
                   {{"", {2, 6, 5, 3}}}});
  cases.push_back(
      {"DepthwiseConv2DDilatedWithoutBias",
       entry("DepthwiseConv2D",
             {{"kernel_size", 3}, {"dilation_rate", 2}, {"use_bias", false}, {"padding", "same"}}),
       {{"", {2, 6, 6, 2}}}});
  cases.push_back(
      {"SeparableConv2D",
       entry("SeparableConv2D", {{"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}}),
       {{"", {2, 6, 5, 3}}}});
  cases.push_back({"SeparableConv2DMultiplierStridedSame",
                   entry("SeparableConv2D", {{"filters", 5},
                                             {"kernel_size", 3},
                                             {"strides", 2},
                                             {"padding", "same"},
                                             {"depth_multiplier", 2}}),
                   {{"", {2, 7, 6, 2}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, ImageBorderAndUpsamplingLayersMatchPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"ZeroPadding2D",
                   entry("ZeroPadding2D", {{"padding", {{1, 2}, {0, 3}}}}),
                   {{"", {2, 4, 5, 3}}}});
  cases.push_back(
      {"Cropping2D", entry("Cropping2D", {{"cropping", {{1, 0}, {2, 1}}}}), {{"", {2, 4, 6, 3}}}});
  cases.push_back(
      {"UpSampling2D", entry("UpSampling2D", {{"size", {2, 3}}}), {{"", {2, 3, 4, 2}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, NewActivationsPReLUAndRescalingMatchPyTorch) {
  std::vector<Case> cases;
  for (const char* name : {"leaky_relu", "hard_sigmoid", "hard_swish", "mish", "log_softmax"})
    cases.push_back({std::string("Activation_") + name,
                     entry("Activation", {{"activation", name}}),
                     {{"", {4, 25}, false, 5.0f}}});  // [-5, 5]: both sides of the kinks
  cases.push_back({"ReLU6Leaky",
                   entry("ReLU", {{"max_value", 6.0}, {"negative_slope", 0.1}}),
                   {{"", {4, 25}, false, 8.0f}}});
  cases.push_back({"ReLUThreshold",
                   entry("ReLU", {{"threshold", 0.5}, {"negative_slope", 0.2}}),
                   {{"", {4, 25}, false, 3.0f}}});
  cases.push_back({"LeakyReLU", entry("LeakyReLU", {{"negative_slope", 0.25}}), {{"", {4, 25}}}});
  cases.push_back({"ELUAlpha", entry("ELU", {{"alpha", 0.7}}), {{"", {4, 25}, false, 3.0f}}});
  cases.push_back({"PReLU", entry("PReLU"), {{"", {4, 3, 5}}}});  // an alpha per value
  cases.push_back({"PReLUPerChannel",
                   entry("PReLU", {{"shared_axes", {1, 2}}}),
                   {{"", {2, 4, 5, 3}}}});  // after a Conv2D: an alpha per channel
  cases.push_back(
      {"PReLUSharedMiddle", entry("PReLU", {{"shared_axes", 2}}), {{"", {3, 4, 2, 3}}}});
  cases.push_back({"Normalization",
                   entry("Normalization", {{"mean", {0.5, -1, 2}}, {"variance", {4, 0.25, 1e-20}}}),
                   {{"", {4, 2, 3}, false, 3.0f}}});  // the third variance under the 1e-7 floor
  cases.push_back({"NormalizationInvert",
                   entry("Normalization", {{"mean", 1.5}, {"variance", 9}, {"invert", true}}),
                   {{"", {4, 5}}}});
  cases.push_back(
      {"NormalizationAdapted",  // the statistics are weights (Keras' adapt())
       entry("Normalization", {{"axis", {-1}}, {"mean", nullptr}, {"variance", nullptr}}),
       {{"", {4, 3, 6}}}});
  cases.push_back(
      {"Rescaling", entry("Rescaling", {{"scale", 0.25}, {"offset", -1.5}}), {{"", {3, 4, 2}}}});
  check_against_torch(cases);
}

// Discretization and CategoryEncoding against PyTorch: torch.bucketize(x, boundaries,
// right=True) for the bins (NumPy's digitize), F.one_hot and its max (multi-hot) or sum (count)
// over the sample's first axis for the encodings. Their outputs are integers: compared exactly.
constexpr const char* kCategoriesTorch = R"PY(
import json, sys, torch
import torch.nn.functional as F
d = json.load(open(sys.argv[1]))
x = torch.tensor(d["x"], dtype=torch.float32).reshape(40, 5)
b = torch.tensor(d["boundaries"], dtype=torch.float32)
bins = torch.bucketize(x, b, right=True)  # (samples, 5)
depth = len(d["boundaries"]) + 1
hot = F.one_hot(bins, depth).float()  # (samples, 5, depth)
cats = torch.tensor(d["categories"], dtype=torch.int64).reshape(d["categories_shape"])
cat_hot = F.one_hot(cats, d["tokens"]).float()  # (samples, 3, 2, tokens)
json.dump({"bins": bins.flatten().tolist(),
           "one_hot": hot.flatten().tolist(),
           "multi_hot": hot.amax(dim=1).flatten().tolist(),
           "count": hot.sum(dim=1).flatten().tolist(),
           "categories_count": cat_hot.sum(dim=1).flatten().tolist(),
           "categories_multi_hot": cat_hot.amax(dim=1).flatten().tolist()},
          open(sys.argv[2], "w"))
)PY";

std::vector<float> forward_of(const json& entry, const Shape& batch_shape,
                              const std::vector<float>& values) {
  auto layer = make(entry);
  Rng init(1);
  layer->build(Shape(batch_shape.begin() + 1, batch_shape.end()), init);
  const Tensor& y = layer->forward(Tensor::from_vector(batch_shape, values), true);
  return std::vector<float>(y.data(), y.data() + y.size());
}

TEST(LayerOracle, CategoryLayersMatchPyTorch) {
  const fs::path dir = test::scratch_dir("layer-oracle-categories");
  const std::vector<double> boundaries = {-1.0, -0.25, 0.0, 0.5, 0.5, 2.0};
  Rng rng(17);
  std::vector<float> x;  // 40 samples of 5: values around the boundaries and on them
  for (int i = 0; i < 200; ++i)
    x.push_back(i % 7 == 0 ? static_cast<float>(boundaries[static_cast<std::size_t>(i) % 6])
                           : static_cast<float>(-3.0 + 6.0 * rng.uniform()));
  std::vector<float> categories;  // 40 samples of (3, 2) below 4
  for (int i = 0; i < 240; ++i) categories.push_back(static_cast<float>(rng.below(4)));
  test::write_text(dir / "in.json", json({{"x", json(x)},
                                          {"boundaries", boundaries},
                                          {"categories", json(categories)},
                                          {"categories_shape", {40, 3, 2}},
                                          {"tokens", 4}})
                                        .dump());
  const auto r = test::run_python(dir / "categories_torch.py", kCategoriesTorch,
                                  (dir / "in.json").string() + " " + (dir / "out.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json want = json::parse(test::read_text(dir / "out.json"));
  const auto discretization = [&](const char* mode) {
    return json{{"class_name", "Discretization"},
                {"config", {{"bin_boundaries", boundaries}, {"output_mode", mode}}}};
  };
  EXPECT_EQ(json(forward_of(discretization("int"), {40, 5}, x)), want["bins"]);
  // one_hot of each value: a sample of (5, 1) loses its last axis, as Keras' does.
  EXPECT_EQ(json(forward_of(discretization("one_hot"), {40, 5, 1}, x)), want["one_hot"]);
  EXPECT_EQ(json(forward_of(discretization("multi_hot"), {40, 5}, x)), want["multi_hot"]);
  EXPECT_EQ(json(forward_of(discretization("count"), {40, 5}, x)), want["count"]);
  const auto encoding = [](const char* mode) {
    return json{{"class_name", "CategoryEncoding"},
                {"config", {{"num_tokens", 4}, {"output_mode", mode}}}};
  };
  EXPECT_EQ(json(forward_of(encoding("count"), {40, 3, 2}, categories)), want["categories_count"]);
  EXPECT_EQ(json(forward_of(encoding("multi_hot"), {40, 3, 2}, categories)),
            want["categories_multi_hot"]);
}

// IntegerLookup against PyTorch: torch.searchsorted over the sorted vocabulary for the indices
// (values truncated by torch.trunc, unknown ones to torch.remainder's bucket), the mask token to
// 0, the inverse by indexing the vocabulary, F.one_hot summed over the sample's first axis for
// the counts (a masked value's column dropped) and tf_idf's product. Compared exactly.
constexpr const char* kLookupTorch = R"PY(
import json, sys, torch
import torch.nn.functional as F
d = json.load(open(sys.argv[1]))
x = torch.trunc(torch.tensor(d["x"], dtype=torch.float64)).reshape(40, 5)
vocab = torch.tensor(d["vocab"], dtype=torch.float64)
order = torch.argsort(vocab)
ranked = vocab[order]
def indices(start, oov_start, buckets):
    at = torch.searchsorted(ranked, x).clamp(max=len(ranked) - 1)
    found = ranked[at] == x
    unknown = oov_start + (torch.remainder(x, buckets) if buckets > 1 else torch.zeros_like(x))
    return torch.where(found, (order[at] + start).double(), unknown)
masked = indices(1 + 3, 1, 3)
masked = torch.where(x == 0, torch.zeros_like(masked), masked)
i = torch.trunc(torch.tensor(d["indices"], dtype=torch.float64)).reshape(40, 5)
start = 1 + 1
inside = (i >= start) & (i < start + len(vocab))
inverse = torch.where(inside, vocab[(i - start).clamp(0, len(vocab) - 1).long()],
                      torch.full_like(i, -9.0))
inverse = torch.where(i == 0, torch.zeros_like(inverse), inverse)
depth = 1 + len(vocab)
plain = indices(1, 0, 1)
plain = torch.where(x == 0, torch.full_like(plain, depth), plain)  # the mask, dropped below
counts = F.one_hot(plain.long(), depth + 1).double().sum(dim=1)[:, :depth]
idf = torch.tensor([sum(d["idf"]) / len(d["idf"])] + d["idf"], dtype=torch.float64)
json.dump({"masked_int": masked.flatten().tolist(), "inverse": inverse.flatten().tolist(),
           "counts": counts.flatten().tolist(), "tf_idf": (counts * idf).flatten().tolist()},
          open(sys.argv[2], "w"))
)PY";

TEST(LayerOracle, IntegerLookupMatchesPyTorch) {
  const fs::path dir = test::scratch_dir("layer-oracle-integer-lookup");
  const std::vector<std::int64_t> vocab = {907, -12, 33, 5, 40000, 61, -3};
  const std::vector<double> idf = {0.5, 1.25, 2.0, 0.75, 1.5, 0.25, 3.0};
  Rng rng(23);
  std::vector<float> x, indices;  // 40 samples of 5: vocabulary values, the mask, unknowns
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t pick = rng.below(4);
    x.push_back(pick == 0   ? 0.0f
                : pick == 1 ? static_cast<float>(-50.0 + 100.0 * rng.uniform())
                            : static_cast<float>(vocab[rng.below(vocab.size())]) +
                                  (pick == 2 ? 0.0f : 0.75f));
    indices.push_back(static_cast<float>(rng.below(12)) - 1.0f);  // -1 .. 10
  }
  test::write_text(
      dir / "in.json",
      json({{"x", json(x)}, {"indices", json(indices)}, {"vocab", vocab}, {"idf", idf}}).dump());
  const auto r = test::run_python(dir / "lookup_torch.py", kLookupTorch,
                                  (dir / "in.json").string() + " " + (dir / "out.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json want = json::parse(test::read_text(dir / "out.json"));
  const auto lookup = [&](json config) {
    config["vocabulary"] = vocab;
    config["mask_token"] = 0;
    return json{{"class_name", "IntegerLookup"}, {"config", config}};
  };
  EXPECT_EQ(json(forward_of(lookup({{"num_oov_indices", 3}}), {40, 5}, x)), want["masked_int"]);
  EXPECT_EQ(json(forward_of(lookup({{"invert", true}, {"oov_token", -9}}), {40, 5}, indices)),
            want["inverse"]);
  EXPECT_EQ(json(forward_of(lookup({{"output_mode", "count"}}), {40, 5}, x)), want["counts"]);
  const std::vector<float> tf_idf =
      forward_of(lookup({{"output_mode", "tf_idf"}, {"idf_weights", idf}}), {40, 5}, x);
  ASSERT_EQ(tf_idf.size(), want["tf_idf"].size());
  for (std::size_t k = 0; k < tf_idf.size(); ++k)
    EXPECT_FLOAT_EQ(tf_idf[k], want["tf_idf"][k].get<float>()) << k;
}

// Keras' Attention (dot-product and concat scores, no projections) and AdditiveAttention on
// [query, value] and [query, value, key]: scaled, causal, and under the query's and the value's
// Keras masks; outputs and the gradients of every input and weight against torch.
TEST(LayerOracle, AttentionMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"AttentionCross", entry("Attention"), {{"", {2, 4, 3}}, {"", {2, 5, 3}}}});
  Case scaled{"AttentionScaledCausalWithKey",
              entry("Attention", {{"use_scale", true}}),
              {{"", {2, 4, 3}}, {"", {2, 4, 5}}, {"", {2, 4, 3}}}};
  scaled.options = {{"use_causal_mask", true}};
  cases.push_back(scaled);
  Case masked{"AttentionMasked",
              entry("Attention", {{"use_scale", true}}),
              {{"", {3, 5, 4}}, {"", {3, 6, 4}}}};
  masked.masks = {{1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1},
                  {1, 1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1}};
  cases.push_back(masked);
  cases.push_back({"AttentionConcat",
                   entry("Attention", {{"score_mode", "concat"}}),
                   {{"", {2, 4, 3}}, {"", {2, 5, 3}}}});
  Case concat_scaled{"AttentionConcatScaledCausalWithKey",
                     entry("Attention", {{"score_mode", "concat"}, {"use_scale", true}}),
                     {{"", {2, 4, 3}}, {"", {2, 4, 5}}, {"", {2, 4, 3}}}};
  concat_scaled.options = {{"use_causal_mask", true}};
  cases.push_back(concat_scaled);
  cases.push_back(
      {"AdditiveAttention", entry("AdditiveAttention"), {{"", {3, 4, 6}}, {"", {3, 7, 6}}}});
  cases.push_back({"AdditiveAttentionUnscaledWithKey",
                   entry("AdditiveAttention", {{"use_scale", false}}),
                   {{"", {2, 5, 3}}, {"", {2, 4, 2}}, {"", {2, 4, 3}}}});
  Case additive_masked{
      "AdditiveAttentionMasked", entry("AdditiveAttention"), {{"", {3, 5, 4}}, {"", {3, 6, 4}}}};
  additive_masked.masks = masked.masks;
  cases.push_back(additive_masked);
  check_against_torch(cases);
}

// UnitNormalization over the last axis, over two axes of images, over the steps; Identity.
TEST(LayerOracle, UnitNormalizationAndIdentityMatchPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"UnitNormalizationLastAxis", entry("UnitNormalization"), {{"", {3, 5, 4}}}});
  cases.push_back({"UnitNormalizationImageAxes",
                   entry("UnitNormalization", {{"axis", {1, 2}}}),
                   {{"", {2, 3, 4, 2}}}});
  cases.push_back(
      {"UnitNormalizationSteps", entry("UnitNormalization", {{"axis", 1}}), {{"", {2, 6, 3}}}});
  cases.push_back({"Identity", entry("Identity"), {{"", {2, 4, 3}}}});
  check_against_torch(cases);
}

// GroupNormalization against torch's group_norm: images and sequences, one group per channel
// (instance normalization), without gamma or beta.
TEST(LayerOracle, GroupNormalizationMatchesPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"GroupNormalizationImages",
                   entry("GroupNormalization", {{"groups", 2}, {"epsilon", 1e-5}}),
                   {{"", {3, 4, 5, 6}, false, 2}}});
  cases.push_back({"GroupNormalizationInstanceSequences",
                   entry("GroupNormalization", {{"groups", -1}}),
                   {{"", {2, 7, 3}}}});
  cases.push_back(
      {"GroupNormalizationOneGroupNoAffine",
       entry("GroupNormalization", {{"groups", 1}, {"center", false}, {"scale", false}}),
       {{"", {4, 6}}}});
  check_against_torch(cases);
}

// The layers that move the steps of sequences, or the axes: padding, cropping and repeating
// steps, a vector repeated as steps, axes permuted; outputs and gradients against torch.
TEST(LayerOracle, SequenceShapeLayersMatchPyTorch) {
  std::vector<Case> cases;
  cases.push_back(
      {"ZeroPadding1D", entry("ZeroPadding1D", {{"padding", {1, 2}}}), {{"", {2, 5, 3}}}});
  cases.push_back({"Cropping1D", entry("Cropping1D", {{"cropping", {2, 1}}}), {{"", {2, 6, 3}}}});
  cases.push_back({"UpSampling1D", entry("UpSampling1D", {{"size", 3}}), {{"", {2, 4, 3}}}});
  cases.push_back({"RepeatVector", entry("RepeatVector", {{"n", 4}}), {{"", {3, 5}}}});
  cases.push_back({"PermuteSteps", entry("Permute", {{"dims", {2, 1}}}), {{"", {2, 4, 3}}}});
  cases.push_back(
      {"PermuteThreeAxes", entry("Permute", {{"dims", {3, 1, 2}}}), {{"", {2, 2, 3, 4}}}});
  check_against_torch(cases);
}

// TimeDistributed: the wrapped layer on every step of every sample with the same weights (a
// Conv2D on the frames of a clip, a Dense on each step), against the same layer in torch on the
// steps as rows.
TEST(LayerOracle, TimeDistributedMatchesPyTorch) {
  const auto wrapped = [](const char* cls, json config) {
    config["name"] = "inner";
    return entry("TimeDistributed", {{"layer", {{"class_name", cls}, {"config", config}}}});
  };
  std::vector<Case> cases;
  cases.push_back({"TimeDistributedConv2D",
                   wrapped("Conv2D", {{"filters", 3},
                                      {"kernel_size", 3},
                                      {"padding", "same"},
                                      {"activation", "tanh"}}),
                   {{"", {2, 3, 5, 4, 2}}}});
  cases.push_back({"TimeDistributedDense",
                   wrapped("Dense", {{"units", 4}, {"activation", "sigmoid"}}),
                   {{"", {3, 5, 6}}}});
  cases.push_back({"TimeDistributedGlobalMaxPooling2D",
                   wrapped("GlobalMaxPooling2D", json::object()),
                   {{"", {2, 3, 4, 6, 2}}}});
  check_against_torch(cases);
}

TEST(LayerOracle, OneInputLayersMatchPyTorch) {
  std::vector<Case> cases;
  cases.push_back({"GlobalAveragePooling1D", entry("GlobalAveragePooling1D"), {{"", {3, 5, 4}}}});
  cases.push_back({"ELU", entry("ELU"), {{"", {4, 9}}}});
  cases.push_back({"PositionEmbedding",
                   entry("PositionEmbedding", {{"sequence_length", 7}}),
                   {{"", {3, 5, 4}}}});  // 5 of its 7 positions in use
  cases.push_back({"ReLU", entry("ReLU"), {{"", {4, 9}}}});
  cases.push_back({"Softmax", entry("Softmax"), {{"", {4, 9}}}});
  check_against_torch(cases);
}

// Masked steps (Keras' mask from Embedding's mask_zero or Masking): 3 sequences of 7 steps, one
// whole, one padded at the end, one with holes. The reference steps torch's own cells
// (torch.lstm_cell, gru_cell, rnn_tanh_cell) and keeps the states of a masked step as Keras'
// RNN does (its backends' rnn(): where(mask, new, old)); keras_torch.py first checks that
// reference against torch's packed sequences where the padding is at the end.
TEST(LayerOracle, MaskedRecurrentLayersMatchPyTorch) {
  const std::vector<float> mask{1, 1, 1, 1, 1, 1, 1,  //
                                1, 1, 1, 1, 0, 0, 0,  //
                                0, 1, 0, 1, 1, 0, 1};
  const std::vector<Input> sequences{{"", {3, 7, 4}}};
  std::vector<Case> cases;
  const auto masked = [&](const char* label, json layer) {
    Case c{label, std::move(layer), sequences};
    c.masks = {mask};
    cases.push_back(c);
  };
  masked("MaskedLstmLast", entry("LSTM", {{"units", 5}}));
  masked("MaskedLstmSequencesBackwards",
         entry("LSTM", {{"units", 4}, {"return_sequences", true}, {"go_backwards", true}}));
  masked("MaskedLstmZeroOutputs",
         entry("LSTM", {{"units", 3}, {"return_sequences", true}, {"zero_output_for_mask", true}}));
  masked("MaskedGruSequences", entry("GRU", {{"units", 4}, {"return_sequences", true}}));
  masked("MaskedGruLastBackwards", entry("GRU", {{"units", 3}, {"go_backwards", true}}));
  masked("MaskedGruResetBeforeSequences",
         entry("GRU", {{"units", 4}, {"reset_after", false}, {"return_sequences", true}}));
  masked("MaskedSimpleRnnLast", entry("SimpleRNN", {{"units", 4}}));
  json bidirectional = entry("Bidirectional", {{"merge_mode", "concat"}});
  bidirectional["config"]["layer"] = {
      {"class_name", "LSTM"},
      {"config", {{"name", "inner"}, {"units", 3}, {"return_sequences", true}}}};
  masked("MaskedBidirectionalSequences", bidirectional);
  bidirectional["config"]["layer"]["config"]["return_sequences"] = false;
  bidirectional["config"]["merge_mode"] = "sum";
  masked("MaskedBidirectionalLast", bidirectional);
  bidirectional["config"]["layer"] = {
      {"class_name", "RNN"},
      {"config",
       {{"name", "rnn"},
        {"return_sequences", true},
        {"cell",
         {{"class_name", "GRUCell"}, {"config", {{"name", "gru_cell_2"}, {"units", 3}}}}}}}};
  bidirectional["config"]["merge_mode"] = "concat";
  masked("MaskedBidirectionalRnnOverACell", bidirectional);
  masked("MaskedGlobalAveragePooling1D", entry("GlobalAveragePooling1D"));
  // BatchNormalization in training: the statistics of the kept steps (Keras 3's masked
  // moments); unmasked, torch's own batch_norm.
  for (const bool with_mask : {true, false}) {
    Case bn{with_mask ? "MaskedBatchNormalizationTraining" : "BatchNormalizationTraining",
            entry("BatchNormalization", {{"momentum", 0.9}}), sequences};
    if (with_mask) bn.masks = {mask};
    bn.training = true;
    cases.push_back(bn);
  }
  // Attention: the query's and the value's masks (self-attention on a padded sequence), with an
  // attention mask too, and a masked key of its own; the padded queries see no key (Keras 3:
  // uniform without dropout).
  Case self{"MaskedSelfAttention",
            entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 3}}),
            {{"", {3, 7, 4}}, {"value", {3, 7, 4}}}};
  self.masks = {mask, mask};
  cases.push_back(self);
  Case cross{"MaskedCrossAttentionWithMaskAndKey",
             entry("MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 2}}),
             {{"", {3, 7, 4}},
              {"value", {3, 5, 3}},
              {"key", {3, 5, 6}},
              {"attention_mask", {3, 7, 5}, true, 1, 0.8f}}};
  cross.masks = {mask,
                 {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1},
                 {1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                 {}};
  cases.push_back(cross);
  check_against_torch(cases);
}

// return_state and initial_state (an encoder's states starting a decoder): the output followed
// by the final states, packed as the layer gives them, against Keras' loop stepped with torch's
// own cells from the given states; the gradients of the states given, and through the states
// returned, included.
TEST(LayerOracle, RecurrentStatesMatchPyTorch) {
  const std::vector<float> mask{1, 1, 1, 1, 1, 1, 1,  //
                                1, 1, 1, 1, 0, 0, 0,  //
                                0, 1, 0, 1, 1, 0, 1};
  const auto with_states = [](int states, std::int64_t units) {
    std::vector<Input> inputs{{"", {3, 7, 5}}};
    for (int i = 0; i < states; ++i) inputs.push_back({"initial_state", {3, units}});
    return inputs;
  };
  std::vector<Case> cases;
  cases.push_back(
      {"LstmSequencesAndStatesFromGivenStates",
       entry("LSTM", {{"units", 4}, {"return_sequences", true}, {"return_state", true}}),
       with_states(2, 4)});
  cases.push_back({"LstmFromGivenStates", entry("LSTM", {{"units", 4}}), with_states(2, 4)});
  cases.push_back(
      {"LstmStatesOnly", entry("LSTM", {{"units", 3}, {"return_state", true}}), with_states(0, 3)});
  Case masked{"MaskedLstmBackwardsStatesFromGivenStates",
              entry("LSTM", {{"units", 3}, {"return_state", true}, {"go_backwards", true}}),
              with_states(2, 3)};
  masked.masks = {mask, {}, {}};
  cases.push_back(masked);
  cases.push_back({"GruStatesFromGivenState",
                   entry("GRU", {{"units", 4}, {"return_sequences", true}, {"return_state", true}}),
                   with_states(1, 4)});
  cases.push_back({"GruResetBeforeStatesFromGivenState",
                   entry("GRU", {{"units", 3}, {"reset_after", false}, {"return_state", true}}),
                   with_states(1, 3)});
  cases.push_back({"SimpleRnnStatesFromGivenState",
                   entry("SimpleRNN", {{"units", 4}, {"return_state", true}}), with_states(1, 4)});
  // Bidirectional: the merged output, then the forward layer's states, then the backward
  // layer's; the given states split in halves between them.
  const auto bidirectional = [](const char* cls, json inner, const char* merge) {
    inner["name"] = "inner";
    json b = entry("Bidirectional", {{"merge_mode", merge}});
    b["config"]["layer"] = {{"class_name", cls}, {"config", inner}};
    return b;
  };
  cases.push_back(
      {"BidirectionalLstmSequencesStatesFromGivenStates",
       bidirectional("LSTM", {{"units", 3}, {"return_sequences", true}, {"return_state", true}},
                     "concat"),
       with_states(4, 3)});
  cases.push_back({"BidirectionalGruLastStatesSum",
                   bidirectional("GRU", {{"units", 4}, {"return_state", true}}, "sum"),
                   with_states(0, 4)});
  Case masked_bi{"MaskedBidirectionalLstmStatesFromGivenStatesMul",
                 bidirectional("LSTM", {{"units", 2}, {"return_state", true}}, "mul"),
                 with_states(4, 2)};
  masked_bi.masks = {mask, {}, {}, {}, {}};
  cases.push_back(masked_bi);
  check_against_torch(cases);
}

// SimpleRNN, LSTM and GRU against torch.nn.RNN / LSTM / GRU run with the same weights (Keras'
// layouts mapped to torch's: transposed, the GRU's gates reordered), and, for activations torch's
// modules do not take, against Keras' cell formulas stepped by hand in torch (keras_torch.py).
// Seven steps from zero states: the gradients pass back through every step.
TEST(LayerOracle, RecurrentLayersMatchPyTorch) {
  std::vector<Case> cases;
  const std::vector<Input> sequences{{"", {3, 7, 4}}};
  cases.push_back(
      {"LstmSequences", entry("LSTM", {{"units", 5}, {"return_sequences", true}}), sequences});
  cases.push_back(
      {"LstmLastBackwards", entry("LSTM", {{"units", 6}, {"go_backwards", true}}), sequences});
  cases.push_back({"LstmOwnActivationsNoBias",
                   entry("LSTM", {{"units", 4},
                                  {"activation", "softsign"},
                                  {"recurrent_activation", "hard_sigmoid"},
                                  {"use_bias", false},
                                  {"return_sequences", true}}),
                   sequences});
  cases.push_back(
      {"GruSequences", entry("GRU", {{"units", 5}, {"return_sequences", true}}), sequences});
  cases.push_back({"GruLastBackwards",
                   entry("GRU", {{"units", 3}, {"go_backwards", true}, {"reset_after", true}}),
                   sequences});
  cases.push_back({"GruOwnActivations",
                   entry("GRU", {{"units", 4},
                                 {"activation", "relu"},
                                 {"recurrent_activation", "hard_sigmoid"},
                                 {"return_sequences", true}}),
                   sequences});
  // reset_after false (Keras 2.2's default): the reset gate on h before the recurrent kernel,
  // one bias; torch's GRU is the other form, so Keras' formula is stepped in torch.
  cases.push_back({"GruResetBeforeSequences",
                   entry("GRU", {{"units", 5}, {"reset_after", false}, {"return_sequences", true}}),
                   sequences});
  cases.push_back({"GruResetBeforeLastBackwardsNoBias",
                   entry("GRU", {{"units", 3},
                                 {"reset_after", false},
                                 {"go_backwards", true},
                                 {"use_bias", false},
                                 {"recurrent_activation", "hard_sigmoid"}}),
                   sequences});
  cases.push_back(
      {"SimpleRnnTanh", entry("SimpleRNN", {{"units", 5}, {"return_sequences", true}}), sequences});
  const auto wrapped = [](const char* cls, json config, json outer = json::object()) {
    config["name"] = "inner";
    outer["layer"] = {{"class_name", cls}, {"config", config}};
    return entry("Bidirectional", outer);
  };
  cases.push_back({"BidirectionalLstmConcat",
                   wrapped("LSTM", {{"units", 4}, {"return_sequences", true}}), sequences});
  cases.push_back({"BidirectionalGruSumLast",
                   wrapped("GRU", {{"units", 3}}, {{"merge_mode", "sum"}}), sequences});
  cases.push_back(
      {"BidirectionalRnnMul",
       wrapped("SimpleRNN", {{"units", 3}, {"return_sequences", true}}, {{"merge_mode", "mul"}}),
       sequences});
  json own_backward = wrapped("LSTM", {{"units", 2}}, {{"merge_mode", "ave"}});
  own_backward["config"]["backward_layer"] = {
      {"class_name", "LSTM"},
      {"config",
       {{"name", "other"}, {"units", 2}, {"go_backwards", true}, {"activation", "softsign"}}}};
  cases.push_back({"BidirectionalOwnBackwardLayerAve", own_backward, sequences});
  cases.push_back(
      {"SimpleRnnReluLast", entry("SimpleRNN", {{"units", 4}, {"activation", "relu"}}), sequences});
  check_against_torch(cases);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem

namespace tandem {
namespace TANDEM_TEST_FILE {

struct LossCase {
  json spec;  // the loss as a config gives it
  float pred_lo, pred_hi, target_lo, target_hi;
  bool labels = false;   // targets drawn from {-1, 0, 1} (hinge labels)
  Shape shape = {6, 5};  // the batch of outputs
  bool sparse = false;   // targets: a class index per position (shape without its last axis)
  bool one_hot = false;  // targets: one-hot classes of the last axis
};

TEST(LossOracle, KerasLossesMatchTheirFormulasInPyTorch) {
  const std::vector<LossCase> cases = {
      {{{"class_name", "Huber"}, {"config", {{"delta", 0.7}}}}, -2, 2, -2, 2},
      {json("hinge"), -2, 2, 0, 0, true},
      {{{"class_name", "SquaredHinge"}, {"config", json::object()}}, -2, 2, 0, 0, true},
      {json("kl_divergence"), 0.01f, 1, 0.01f, 1},
      {json("log_cosh"), -3, 3, -3, 3},
      {json("poisson"), 0.1f, 4, 0, 5},
      {{{"class_name", "CosineSimilarity"}, {"config", {{"axis", -1}}}}, -1, 1, -1, 1},
      // Outputs with positions (a sequence's steps, an image's pixels): the loss of the last
      // axis at each, their mean over every other axis, against torch's own cross-entropy over
      // a class axis of (N, C, d1, ...).
      {json("kl_divergence"), 0.01f, 1, 0.01f, 1, false, {4, 3, 5}},
      {{{"class_name", "CosineSimilarity"}, {"config", {{"axis", -1}}}},
       -1,
       1,
       -1,
       1,
       false,
       {4, 3, 5}},
      {json("categorical_crossentropy"), 0.05f, 1, 0, 0, false, {4, 3, 5}, false, true},
      {{{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}},
       -3,
       3,
       0,
       0,
       false,
       {4, 3, 5},
       false,
       true},
      {{{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}},
       -3,
       3,
       0,
       0,
       false,
       {3, 4, 2, 5},
       true},
      {json("sparse_categorical_crossentropy"), 0.05f, 1, 0, 0, false, {4, 3, 5}, true},
  };
  std::vector<fs::path> dirs;
  std::vector<Tensor> grads;
  std::vector<double> values;
  std::string command = std::string(test::system_python()) + " " +
                        (test::source_dir() / "tests/oracle/keras_torch.py").string();
  Rng rng(11);
  for (const LossCase& c : cases) {
    const auto loss = make_loss(c.spec, "loss");
    const Shape& shape = c.shape;
    const std::int64_t classes = shape.back();
    const Shape target_shape = c.sparse ? Shape(shape.begin(), shape.end() - 1) : shape;
    Tensor pred(shape), target(target_shape);
    for (std::int64_t i = 0; i < pred.size(); ++i)
      pred[i] = c.pred_lo + (c.pred_hi - c.pred_lo) * static_cast<float>(rng.uniform());
    for (std::int64_t i = 0; i < target.size(); ++i)
      target[i] = c.labels   ? static_cast<float>(rng.below(3)) - 1.0f
                  : c.sparse ? static_cast<float>(rng.below(static_cast<std::uint64_t>(classes)))
                             : c.target_lo +
                                   (c.target_hi - c.target_lo) * static_cast<float>(rng.uniform());
    if (c.one_hot)
      for (std::int64_t p = 0; p < target.size() / classes; ++p)
        target[p * classes +
               static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)))] = 1;
    Tensor grad(shape);
    const std::int64_t n = shape[0];
    values.push_back(loss->compute(pred, target, 1.0f / static_cast<float>(n), &grad) /
                     static_cast<double>(n));
    grads.push_back(grad);
    dirs.push_back(
        test::scratch_dir("loss-oracle-" + std::to_string(dirs.size()) + "-" + loss->name()));
    write_floats(dirs.back() / "pred.bin", pred);
    write_floats(dirs.back() / "target.bin", target);
    const json config = c.spec.is_object() ? c.spec["config"] : json::object();
    test::write_text(dirs.back() / "case.json",
                     json{{"loss", loss->name()},
                          {"config", config},
                          {"pred", {{"file", "pred.bin"}, {"shape", shape}}},
                          {"target", {{"file", "target.bin"}, {"shape", target_shape}}}}
                         .dump());
    command.append(" ").append(dirs.back().string());
  }
  const auto r = test::run_command(command);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k].spec.dump() + " on " + shape_to_string(cases[k].shape));
    const double torch_value = read_floats(dirs[k] / "loss.bin", 1)[0];
    EXPECT_LE(std::fabs(values[k] - torch_value), kBar * std::max(1.0, std::fabs(torch_value)))
        << "loss " << values[k] << ", torch " << torch_value;
    EXPECT_LE(relative_error(grads[k], read_floats(dirs[k] / "dpred.bin", grads[k].size())), kBar)
        << "gradient";
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem

namespace tandem {
namespace TANDEM_TEST_FILE {

// A case folder for keras_torch.py's optimizer steps: the start weights (one tensor) and the
// gradients of every step (steps x its size).
fs::path optimizer_case(const std::string& tag, const std::string& optimizer, const json& config,
                        const Tensor& weights, const Tensor& grads) {
  const fs::path dir = test::scratch_dir(tag);
  write_floats(dir / "w.bin", weights);
  write_floats(dir / "g.bin", grads);
  test::write_text(dir / "case.json",
                   json{{"optimizer", optimizer},
                        {"config", config},
                        {"weights", {{"file", "w.bin"}, {"shape", weights.shape()}}},
                        {"grads", {{"file", "g.bin"}, {"shape", grads.shape()}}}}
                       .dump());
  return dir;
}

TEST(OptimizerOracle, KerasOptimizersMatchTheirRulesInPyTorch) {
  const std::vector<json> specs = {
      {{"class_name", "Adagrad"}, {"config", {{"learning_rate", 0.05}}}},
      {{"class_name", "Adadelta"}, {"config", {{"learning_rate", 1.0}, {"rho", 0.9}}}},
      {{"class_name", "Adamax"}, {"config", {{"learning_rate", 0.01}}}},
      {{"class_name", "Nadam"}, {"config", {{"learning_rate", 0.01}}}},
      {{"class_name", "Lion"}, {"config", {{"learning_rate", 0.001}}}},
  };
  constexpr int kSteps = 6;
  const Shape shape{40};
  std::vector<fs::path> dirs;
  std::vector<Tensor> start, finish;
  std::string command = std::string(test::system_python()) + " " +
                        (test::source_dir() / "tests/oracle/keras_torch.py").string();
  Rng rng(5);
  for (const json& spec : specs) {
    const auto optimizer = make_optimizer(spec, "optimizer");
    Parameter p;
    p.name = "w";
    p.value = random_tensor(shape, rng, false);
    start.push_back(p.value.clone());
    p.grad = Tensor(shape);
    Tensor grads({kSteps, 40});
    for (int step = 0; step < kSteps; ++step) {
      const float scale = 0.1f * static_cast<float>(step + 1);
      for (std::int64_t i = 0; i < 40; ++i) {
        p.grad[i] = scale * static_cast<float>(2 * rng.uniform() - 1);
        grads[step * 40 + i] = p.grad[i];
      }
      optimizer->apply({&p});
    }
    finish.push_back(p.value.clone());
    dirs.push_back(optimizer_case("optimizer-oracle-" + optimizer->class_name(),
                                  optimizer->class_name(), spec["config"], start.back(), grads));
    command.append(" ").append(dirs.back().string());
  }
  const auto r = test::run_command(command);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    SCOPED_TRACE(specs[k].dump());
    // Against the moves, not the weights: the bar is on what the optimizer did.
    const std::vector<float> keras = read_floats(dirs[k] / "w_keras.bin", 40);
    Tensor ours_moved(shape);
    std::vector<float> keras_moved(40);
    for (std::int64_t i = 0; i < 40; ++i) {
      ours_moved[i] = finish[k][i] - start[k][i];
      keras_moved[static_cast<std::size_t>(i)] = keras[static_cast<std::size_t>(i)] - start[k][i];
    }
    EXPECT_GT(max_abs(keras_moved), 1e-4) << "the steps must move the weights";
    EXPECT_LE(relative_error(ours_moved, keras_moved), 1e-4)
        << "weights after " << kSteps << " steps";
    if (fs::exists(dirs[k] / "w_torch_optim.bin")) {
      const std::vector<float> torch_optim = read_floats(dirs[k] / "w_torch_optim.bin", 40);
      std::vector<float> moved(40);
      for (std::size_t i = 0; i < 40; ++i)
        moved[i] = torch_optim[i] - start[k][static_cast<std::int64_t>(i)];
      EXPECT_LE(relative_error(ours_moved, moved), 1e-4) << "against torch.optim";
    }
  }
}

// Keras' use_ema against torch's AveragedModel around torch.optim.SGD (keras_torch.py): Keras 3's
// average (from the first step's weights) and tf.keras 2's (from the weights before it) with
// ema_overwrite_frequency 3, each taken as the weights at the end (Keras' end of fit).
TEST(OptimizerOracle, MovingAveragesMatchTorchsAveragedModel) {
  const json base = {
      {"learning_rate", 0.05}, {"momentum", 0.9}, {"use_ema", true}, {"ema_momentum", 0.8}};
  json keras2 = base;
  keras2["is_legacy_optimizer"] = false;
  keras2["ema_overwrite_frequency"] = 3;
  const std::vector<json> configs = {base, keras2};
  constexpr int kSteps = 8;
  const Shape shape{40};
  std::vector<fs::path> dirs;
  std::vector<Tensor> start, raw, averaged;
  std::string command = std::string(test::system_python()) + " " +
                        (test::source_dir() / "tests/oracle/keras_torch.py").string();
  Rng rng(11);
  for (std::size_t k = 0; k < configs.size(); ++k) {
    const auto optimizer = make_optimizer(json{{"class_name", "SGD"}, {"config", configs[k]}}, "o");
    Parameter p;
    p.name = "w";
    p.value = random_tensor(shape, rng, false);
    start.push_back(p.value.clone());
    p.grad = Tensor(shape);
    Tensor grads({kSteps, 40});
    for (int step = 0; step < kSteps; ++step) {
      for (std::int64_t i = 0; i < 40; ++i) {
        p.grad[i] = static_cast<float>(2 * rng.uniform() - 1);
        grads[step * 40 + i] = p.grad[i];
      }
      optimizer->apply({&p});
    }
    raw.push_back(p.value.clone());
    ASSERT_TRUE(optimizer->use_moving_averages({&p}));
    averaged.push_back(p.value.clone());
    dirs.push_back(optimizer_case("optimizer-oracle-ema-" + std::to_string(k), "SGD", configs[k],
                                  start.back(), grads));
    command.append(" ").append(dirs.back().string());
  }
  const auto r = test::run_command(command);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (std::size_t k = 0; k < configs.size(); ++k) {
    SCOPED_TRACE(configs[k].dump());
    const std::vector<float> torch_average = read_floats(dirs[k] / "w_ema_torch.bin", 40);
    EXPECT_LE(relative_error(averaged[k], torch_average), 1e-5) << "the averaged weights";
    EXPECT_GT(relative_error(raw[k], torch_average), 1e-2)
        << "the average must differ from the last weights for the comparison to mean anything";
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
