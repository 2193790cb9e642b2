// loader_bench: the images dataset's throughput — files read, decoded (libjpeg-turbo, libpng),
// resized and scaled by its worker pool, then augmented by Keras-style layers on the CPU
// backend — in images per second, as one JSON line. bench/loader_compare runs it next to a
// PIL + NumPy baseline in a PyTorch DataLoader with as many workers (bench/loader_torch.py).
//
//   loader_bench FOLDER ROWS COLS COLOR_MODE WORKERS BATCH SECONDS
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "tandem/model.hpp"
#include "tandem/rng.hpp"

using namespace tandem;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: loader_bench FOLDER ROWS COLS COLOR_MODE WORKERS BATCH SECONDS\n");
    return 2;
  }
  const std::string folder = argv[1], mode = argv[4];
  const int rows = std::stoi(argv[2]), cols = std::stoi(argv[3]), workers = std::stoi(argv[5]);
  const int batch = std::stoi(argv[6]);
  const double seconds = std::stod(argv[7]);
  const nlohmann::json spec = {{"type", "images"},    {"path", folder},
                               {"image_size", {rows, cols}}, {"color_mode", mode},
                               {"workers", workers}};
  const auto data = make_dataset(spec, "data.train", "");
  const std::int64_t channels = data->x_shape()[2];
  // The augmentation the PIL baseline does too: a horizontal flip, a shift of up to 10% with a
  // constant fill, a contrast change.
  const nlohmann::json augment = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"},
           {"config", {{"batch_input_shape", {nullptr, rows, cols, channels}}}}},
          {{"class_name", "RandomFlip"}, {"config", {{"mode", "horizontal"}}}},
          {{"class_name", "RandomTranslation"},
           {"config", {{"height_factor", 0.1}, {"width_factor", 0.1}, {"fill_mode", "constant"}}}},
          {{"class_name", "RandomContrast"},
           {"config", {{"factor", 0.2}, {"value_range", {0, 1}}}}}}}}}};
  auto model = Model::from_config(augment, "augment", 1);

  const std::int64_t n = data->size();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  Rng rng(3);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const std::int64_t row = rows * cols * channels;
  Tensor x({batch, rows, cols, channels});
  std::vector<float> y(static_cast<std::size_t>(batch));
  std::int64_t images = 0, at = 0;
  double checksum = 0;
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    const std::int64_t take = std::min<std::int64_t>(batch, n - at);
    data->read({order.data() + at, static_cast<std::size_t>(take)}, x.data(), y.data());
    const Tensor* out = &x;
    const Tensor in = take == batch ? x : Tensor::view(x, 0, {take, rows, cols, channels});
    out = &in;
    for (std::size_t l = 0; l < model->layer_count(); ++l) out = &model->layer(l).forward(*out, true);
    checksum += (*out)[0];
    images += take;
    at = (at + take) % n;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("{\"images_per_sec\": %.1f, \"images\": %lld, \"seconds\": %.3f, \"workers\": %d, "
              "\"row\": %lld, \"checksum\": %.3f}\n",
              images / elapsed, static_cast<long long>(images), elapsed, workers,
              static_cast<long long>(row), checksum);
  return 0;
}
