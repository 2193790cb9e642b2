// relu_handoff: full fashion-cnn training steps (forward + backward, batch 128) of two models with
// the same weights, interleaved round by round: Conv2D(relu) -> MaxPooling2D, where the Model
// hands the relu to the pooling (the engine's path), against Conv2D -> Activation(relu) ->
// MaxPooling2D, where relu runs over the full convolution output both ways (the path before the
// hand-off). Prints the median and 10th percentile step time of each over 60 rounds of 5 steps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "tandem/model.hpp"
#include "util/process_setup.hpp"
#include "tandem/rng.hpp"

using nlohmann::json;
using tandem::Model;
using tandem::Tensor;

namespace {

json layer(const std::string& class_name, json config) {
  return {{"class_name", class_name}, {"config", config}};
}

std::unique_ptr<Model> fashion_cnn(bool handoff) {
  json layers = {layer("InputLayer", {{"batch_shape", {nullptr, 28, 28, 1}}})};
  for (int filters : {32, 64}) {
    layers.push_back(layer("Conv2D", {{"filters", filters},
                                      {"kernel_size", {3, 3}},
                                      {"activation", handoff ? "relu" : "linear"}}));
    if (!handoff) layers.push_back(layer("Activation", {{"activation", "relu"}}));
    layers.push_back(layer("MaxPooling2D", {{"pool_size", {2, 2}}}));
  }
  layers.push_back(layer("Flatten", json::object()));
  layers.push_back(layer("Dense", {{"units", 128}, {"activation", "relu"}}));
  layers.push_back(layer("Dense", {{"units", 10}}));
  return Model::from_config(
      {{"class_name", "Sequential"}, {"config", {{"name", "fashion_cnn"}, {"layers", layers}}}},
      "model", 1);
}

}  // namespace

int main(int argc, char** argv) {
  tandem::configure_process(argc, argv);
  auto handoff = fashion_cnn(true), plain = fashion_cnn(false);
  auto a = handoff->parameters(), b = plain->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) b[i]->value.copy_from(a[i]->value);
  Tensor x({128, 28, 28, 1}), g({128, 10});
  tandem::Rng rng(1);
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rng.uniform());
  for (std::int64_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(rng.uniform() - 0.5);
  auto step = [&](Model& m) {
    m.forward(x, true);
    m.backward(g);
  };
  for (int i = 0; i < 10; ++i) step(*handoff), step(*plain);
  std::vector<double> times[2];
  for (int round = 0; round < 60; ++round)
    for (int which = 0; which < 2; ++which) {
      Model& m = which == 0 ? *handoff : *plain;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 5; ++i) step(m);
      times[which].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
          5);
    }
  for (auto& t : times) std::sort(t.begin(), t.end());
  std::printf(
      "relu handed to the pooling: median %.2f ms, p10 %.2f ms; relu over the full output: median "
      "%.2f ms, p10 %.2f ms; saved %.2f ms (median)\n",
      times[0][30], times[0][6], times[1][30], times[1][6], times[1][30] - times[0][30]);
}
