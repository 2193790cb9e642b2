// A convolutional LSTM's dropout (nn/conv_lstm.hpp, nn/gate_masks.hpp): its masks by hand — a
// 1x1 ConvLSTM1D of one filter over two steps, so that each cell's output can only be one of a
// few values, one per combination of the gates' masks: Keras 3 masks all four gates alike, Keras
// 2 draws a mask per gate (input and recurrent); inference is the layer without dropout; the
// training gradients through the masks (Keras 2's four-group convolutions included) against
// central differences with the masks held; and an empty shard's forward counting its draws (the
// recurrent layers' too).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "nn/layer_extensions.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

double sigmoid(double v) {
  return 1.0 / (1.0 + std::exp(-v));
}

constexpr double kKernel[4] = {0.7, -0.4, 1.3, 0.9};     // i, f, c, o
constexpr double kRecurrent[4] = {0.5, 1.1, -0.8, 0.6};  // i, f, c, o
constexpr std::int64_t kCells = 48, kBatch = 4;

// A ConvLSTM1D of one filter, kernel 1, no bias, over (2 steps, kCells, 1 channel), with these
// weights; Keras 2's definitions when asked.
std::unique_ptr<Layer> one_filter_layer(json rates, bool keras2) {
  rates.update({{"filters", 1},
                {"kernel_size", 1},
                {"use_bias", false},
                {"return_sequences", true},
                {"recurrent_activation", "sigmoid"},
                {"seed", 7}});
  auto layer = test::make_layer("ConvLSTM1D", rates);
  if (keras2) nn::keras_two_definitions_of(*layer)->use_keras2_definitions();
  Rng init(1);
  layer->build({2, kCells, 1}, init);
  const auto params = layer->parameters();
  for (int g = 0; g < 4; ++g) {
    params[0]->value[g] = static_cast<float>(kKernel[g]);
    params[1]->value[g] = static_cast<float>(kRecurrent[g]);
  }
  return layer;
}

// Step 0 reads ones, step 1 zeros (so only h enters step 1's gates).
Tensor ones_then_zeros() {
  Tensor x({kBatch, 2, kCells, 1});
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t c = 0; c < kCells; ++c) x[(b * 2) * kCells + c] = 1.0f;
  return x;
}

struct Step {
  double h, c;
};

// One LSTM step of the 1x1 cell: gate g's input scaled by in[g] (x's mask), its h_prev by
// rec[g] (h's mask).
Step cell(double x, Step prev, const double in[4], const double rec[4]) {
  double z[4];
  for (int g = 0; g < 4; ++g) z[g] = x * in[g] * kKernel[g] + prev.h * rec[g] * kRecurrent[g];
  const double c = sigmoid(z[1]) * prev.c + sigmoid(z[0]) * std::tanh(z[2]);
  return {sigmoid(z[3]) * std::tanh(c), c};
}

// The mask combinations (each gate's factor 0 or 2, rate 0.5) that give a cell's two outputs;
// `input`: the input's masks vary (else the recurrent ones).
std::set<int> combinations_of(float h0, float h1, bool input) {
  std::set<int> found;
  const double ones[4] = {1, 1, 1, 1};
  for (int bits = 0; bits < 16; ++bits) {
    double m[4];
    for (int g = 0; g < 4; ++g) m[g] = (bits >> g & 1) ? 2.0 : 0.0;
    const Step first = cell(1.0, {0, 0}, input ? m : ones, ones);
    const Step second = cell(0.0, first, ones, input ? ones : m);
    if (std::fabs(first.h - h0) < 1e-6 && std::fabs(second.h - h1) < 1e-6) found.insert(bits);
  }
  return found;
}

// Every cell's outputs are those of some combination of masks; Keras 3's have all four gates
// alike, Keras 2's vary gate by gate.
void expect_masks(bool input, bool keras2) {
  SCOPED_TRACE(std::string(input ? "dropout" : "recurrent_dropout") +
               (keras2 ? ", Keras 2" : ", Keras 3"));
  auto layer = one_filter_layer({{input ? "dropout" : "recurrent_dropout", 0.5}}, keras2);
  const Tensor y = layer->forward(ones_then_zeros(), true).clone();
  std::set<int> seen;
  int unexplained = 0, dropped = 0;
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t c = 0; c < kCells; ++c) {
      const std::set<int> found =
          combinations_of(y[(b * 2) * kCells + c], y[(b * 2 + 1) * kCells + c], input);
      if (found.empty()) ++unexplained;
      // Gates that do not change this cell's outputs (the forget gate of the first step) leave
      // several combinations: the smallest one stands for them.
      if (!found.empty()) seen.insert(*found.begin());
      dropped += !found.empty() && (*found.begin() & 4) == 0;
    }
  EXPECT_EQ(unexplained, 0);
  // Bits: 1 i, 2 f, 4 c, 8 o. The input's masks at the first step: f meets c_prev = 0 and a
  // dropped c leaves h = c = 0 whatever i and o, so five classes stand out: 0 (c dropped), c, i·c,
  // c·o, i·c·o. The recurrent masks at the second step: every gate shows (c dropped hides i).
  const std::set<int> alike = input ? std::set<int>{0, 13} : std::set<int>{0, 15};
  if (keras2 && input) {
    EXPECT_EQ(seen, (std::set<int>{0, 4, 5, 12, 13}));
  } else if (keras2) {
    EXPECT_GE(seen.size(), 10u) << "per-gate masks give many combinations";
  } else {
    EXPECT_EQ(seen, alike) << "one mask for all four gates";
  }
  // About half the cells' c gate is dropped (rate 0.5, 192 cells).
  EXPECT_GT(dropped, 192 / 4);
  EXPECT_LT(dropped, 3 * 192 / 4);
}

TEST(ConvLstmDropout, OneMaskForAllGatesInKeras3AndOnePerGateInKeras2ByHand) {
  for (const bool keras2 : {false, true}) {
    expect_masks(true, keras2);
    expect_masks(false, keras2);
  }
}

TEST(ConvLstmDropout, InferenceIsTheLayerWithoutDropout) {
  for (const bool keras2 : {false, true}) {
    auto dropped = one_filter_layer({{"dropout", 0.5}, {"recurrent_dropout", 0.5}}, keras2);
    auto plain = one_filter_layer(json::object(), keras2);
    const Tensor x = test::random_tensor({kBatch, 2, kCells, 1}, 3);
    const Tensor a = dropped->forward(x, false).clone();
    const Tensor b = plain->forward(x, false);
    for (std::int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
    const Tensor first = dropped->forward(x, true).clone();
    const Tensor second = dropped->forward(x, true).clone();
    int differ = 0;
    for (std::int64_t i = 0; i < first.size(); ++i) differ += first[i] != second[i];
    EXPECT_GT(differ, first.size() / 2) << "each training forward draws afresh";
  }
}

// The gradient of Σ y·dy of a training forward by central differences with the masks held
// (test::expect_training_gradients): a ConvLSTM2D of 2 filters, 3x3 kernels over 3 steps of 4x5
// images of 2 channels, both dropouts.
TEST(ConvLstmDropout, TrainingGradientsThroughTheMasksMatchCentralDifferences) {
  for (const bool keras2 : {false, true}) {
    SCOPED_TRACE(keras2 ? "Keras 2" : "Keras 3");
    auto layer = test::make_layer("ConvLSTM2D", {{"filters", 2},
                                                 {"kernel_size", 3},
                                                 {"padding", "same"},
                                                 {"return_sequences", true},
                                                 {"dropout", 0.3},
                                                 {"recurrent_dropout", 0.4},
                                                 {"recurrent_activation", "sigmoid"}});
    if (keras2) nn::keras_two_definitions_of(*layer)->use_keras2_definitions();
    Rng init(2);
    layer->build({3, 4, 5, 2}, init);
    Tensor x = test::random_tensor({2, 3, 4, 5, 2}, 11);
    test::expect_training_gradients(*layer, x, 12);
  }
}

// A replica whose shard of the batch is empty still counts its layers' draws, so that its random
// streams stay at the template's call and its masks of later steps are keyed as the template's:
// an empty training forward advances each recurrent layer's state as a full one does.
TEST(RecurrentDropout, AnEmptyShardCountsItsDrawsAsAFullOne) {
  const std::vector<std::pair<std::string, json>> layers{
      {"ConvLSTM2D",
       {{"filters", 2},
        {"kernel_size", 3},
        {"padding", "same"},
        {"dropout", 0.3},
        {"recurrent_dropout", 0.2}}},
      {"LSTM", {{"units", 3}, {"dropout", 0.3}, {"recurrent_dropout", 0.2}}},
      {"GRU", {{"units", 3}, {"recurrent_dropout", 0.2}}},
      {"Dropout", {{"rate", 0.5}}}};
  for (const auto& [cls, config] : layers) {
    SCOPED_TRACE(cls);
    const bool conv = cls == "ConvLSTM2D";
    const Shape sample = conv ? Shape{3, 4, 5, 2} : Shape{3, 4};
    auto full = test::make_layer(cls, config), empty = test::make_layer(cls, config),
         idle = test::make_layer(cls, config);
    Rng a(4), b(4), c(4);
    full->build(sample, a);
    empty->build(sample, b);
    idle->build(sample, c);
    Shape some{2}, none{0};
    some.insert(some.end(), sample.begin(), sample.end());
    none.insert(none.end(), sample.begin(), sample.end());
    full->forward(test::random_tensor(some, 1), true);
    empty->forward(Tensor(none), true);
    EXPECT_EQ(empty->random_state(), full->random_state());
    EXPECT_NE(full->random_state(), idle->random_state()) << "the forward drew nothing";
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
