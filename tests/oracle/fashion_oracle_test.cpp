// Oracle: 20 steps of a Fashion-MNIST workload (fashion-mlp with Adam; fashion-cnn with SGD) in
// Tandem and in PyTorch, from the same initial weights on the same batches, must end with the same
// weights and losses.
//
// Tandem builds the model from resources/configs/<workload>.json, saves its initial weights as a
// checkpoint (Keras HDF5 layout), and writes the exact inputs and labels of 20 batches of 128 (a
// seeded DataLoader shuffle of the real training set) as raw float32. keras_sequential_torch.py
// loads both with h5py/numpy, trains with the Keras Adam rule written out in float32 torch, and
// writes its final weights (Keras layout) and per-step losses. Bar: for every weight tensor
// max|tandem - torch| / max|torch| <= 1e-4, and every step's loss within 1e-4 relative. Negative
// control: Tandem trained with a 10% larger learning rate must miss that bar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "data/data_loader.hpp"
#include "data/dataset.hpp"
#include "nn/loss.hpp"
#include "tandem/model.hpp"
#include "optim/optimizer.hpp"
#include "train/run_config.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kSteps = 20;
constexpr std::int64_t kBatch = 128;
constexpr std::uint64_t kLoaderSeed = 20240607;  // any fixed value; it fixes the sample order
constexpr double kBar = 1e-4;                    // the bar

std::string quoted(const fs::path& p) {
  std::string s = p.string();  // test paths hold no single quotes
  s.insert(s.begin(), '\'');
  s.push_back('\'');
  return s;
}

void write_floats(const fs::path& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::vector<float> read_floats(const fs::path& path, std::size_t count) {
  std::vector<float> values(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(values.data()),
          static_cast<std::streamsize>(count * sizeof(float)));
  if (!in || in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(path.string() + " does not hold exactly " + std::to_string(count) +
                             " float32 values");
  return values;
}

// Trains `model` on `batches` the way the Trainer does (one replica, whole batch); returns the
// per-step mean loss, computed before each update.
std::vector<double> train(Model& model, Optimizer& optimizer, const Loss& loss,
                          const std::vector<Batch>& batches) {
  std::vector<double> losses;
  Tensor grad;
  for (const Batch& b : batches) {
    const float scale = 1.0f / static_cast<float>(b.size());
    const Tensor& out = model.forward(b.x, /*training=*/true);
    losses.push_back(loss.compute(out, b.y, scale, &grad) / static_cast<double>(b.size()));
    model.backward(grad);
    optimizer.apply(model.trainable_parameters());
  }
  return losses;
}

struct TensorDiff {
  std::string name;
  Shape shape;
  double max_abs_diff = 0, max_abs_ref = 0;
  double rel() const { return max_abs_ref > 0 ? max_abs_diff / max_abs_ref : max_abs_diff; }
};

// max|a - b| / max|b| for every parameter of `model` against the torch tensors in `manifest`.
std::vector<TensorDiff> compare_weights(Model& model, const json& manifest, const fs::path& dir) {
  std::vector<TensorDiff> diffs;
  auto names = model.parameter_names();
  auto params = model.parameters();
  const json& tensors = manifest.at("tensors");
  if (tensors.size() != params.size())
    throw std::runtime_error("torch wrote " + std::to_string(tensors.size()) +
                             " tensors, the model has " + std::to_string(params.size()));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const json& t = tensors[i];
    if (t.at("name").get<std::string>() != names[i])
      throw std::runtime_error("torch tensor " + std::to_string(i) + " is '" +
                               t.at("name").get<std::string>() + "', Tandem's is '" + names[i] +
                               "'");
    const Tensor& a = params[i]->value;
    if (t.at("shape").get<Shape>() != a.shape())
      throw std::runtime_error(names[i] + ": torch shape " +
                               shape_to_string(t.at("shape").get<Shape>()) + ", Tandem's " +
                               shape_to_string(a.shape()));
    auto b = read_floats(dir / t.at("file").get<std::string>(), static_cast<std::size_t>(a.size()));
    TensorDiff d{names[i], a.shape()};
    for (std::int64_t k = 0; k < a.size(); ++k) {
      d.max_abs_diff = std::max(d.max_abs_diff, std::fabs(double(a[k]) - double(b[k])));
      d.max_abs_ref = std::max(d.max_abs_ref, std::fabs(double(b[k])));
    }
    diffs.push_back(d);
  }
  return diffs;
}

double worst(const std::vector<TensorDiff>& diffs) {
  double w = 0;
  for (const auto& d : diffs) w = std::max(w, d.rel());
  return w;
}

// Worst |a - b| / |b| over the steps; `at` gets the step.
double worst_loss_diff(const std::vector<double>& a, const std::vector<double>& b, int* at) {
  double w = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double r = std::fabs(a[i] - b[i]) / std::max(std::fabs(b[i]), 1e-30);
    if (r >= w) {
      w = r;
      *at = static_cast<int>(i);
    }
  }
  return w;
}

void print_weights(const char* title, const std::vector<TensorDiff>& diffs) {
  std::printf("%s\n  %-16s %-12s %-12s %-12s %s\n", title, "tensor", "shape", "max|a-b|", "max|b|",
              "max|a-b|/max|b|");
  for (const auto& d : diffs)
    std::printf("  %-16s %-12s %-12.4g %-12.4g %.3g\n", d.name.c_str(),
                shape_to_string(d.shape).c_str(), d.max_abs_diff, d.max_abs_ref, d.rel());
}

struct OracleCase {
  std::string workload;   // resources/configs/<workload>.json
  std::string optimizer;  // "adam" (the config's) or "sgd" (plain SGD, lr 0.01)
};

class FashionOracle : public ::testing::TestWithParam<OracleCase> {};

TEST_P(FashionOracle, TwentyStepsMatchPyTorch) {
  const std::string workload = GetParam().workload;
  const bool sgd = GetParam().optimizer == "sgd";
  const fs::path script = test::source_dir() / "tests/oracle/keras_sequential_torch.py";
  const std::string python = test::system_python();

  // A missing torch is a red test, never a silent skip.
  auto probe = test::run_command(python + " -c 'import torch, h5py, numpy'");
  ASSERT_EQ(probe.exit_code, 0) << python << " cannot import torch/h5py/numpy, so the PyTorch "
                                << "oracle cannot run. Install Debian's python3-torch and "
                                << "python3-h5py (scripts/setup does).\n"
                                << probe.err;

  // ---- Tandem: model, loss, optimizer and data from the fashion-mlp run config ----
  const fs::path config_path = test::source_dir() / "resources/configs" / (workload + ".json");
  RunConfig rc = parse_run_config(load_json_file(config_path), config_path.parent_path());
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"})
    ASSERT_TRUE(fs::exists(test::fashion_mnist_dir() / f))
        << (test::fashion_mnist_dir() / f) << " is missing: install dataset-fashion-mnist";
  auto model = Model::from_config(rc.model, "model", rc.seed);
  auto control = model->clone();  // same initial weights, for the negative control
  auto loss = make_loss(rc.loss, "loss");
  // lr 0.01: at 0.1 the CNN's first 20 steps are chaotic (loss differences of 1e-7 at step 7 grow
  // ~10x every 2-3 steps as the loss oscillates), which would test the dynamics, not the maths.
  if (sgd) rc.optimizer = json{{"class_name", "SGD"}, {"config", {{"learning_rate", 0.01}}}};
  auto optimizer = make_optimizer(rc.optimizer, "optimizer");
  const json opt_cfg = optimizer->config();
  ASSERT_EQ(optimizer->class_name(), sgd ? "SGD" : "Adam");
  ASSERT_FALSE(opt_cfg.value("amsgrad", false));
  ASSERT_EQ(rc.batch_size, kBatch);

  auto dataset = make_dataset(rc.data.train, "data.train", rc.base_dir.string());
  ASSERT_EQ(dataset->size(), 60000) << dataset->describe();  // the full training set
  ASSERT_EQ(dataset->x_shape(), (Shape{28, 28}));
  DataLoader loader(dataset,
                    {.batch_size = kBatch, .shuffle = true, .seed = kLoaderSeed, .prefetch = 0});
  loader.start_epoch(0);
  std::vector<Batch> batches(kSteps);
  std::vector<float> xs, ys;
  for (auto& b : batches) {
    ASSERT_TRUE(loader.next(b));
    ASSERT_EQ(b.size(), kBatch);
    xs.insert(xs.end(), b.x.values().begin(), b.x.values().end());
    ys.insert(ys.end(), b.y.values().begin(), b.y.values().end());
  }
  // The data really is scaled pixels in [0, 1] and labels 0..9, not a stand-in.
  ASSERT_GT(*std::max_element(xs.begin(), xs.end()), 0.99f);
  ASSERT_LE(*std::max_element(xs.begin(), xs.end()), 1.0f);
  ASSERT_EQ(*std::max_element(ys.begin(), ys.end()), 9.0f);

  const fs::path dir = test::scratch_dir(workload + "-" + GetParam().optimizer + "-oracle");
  write_floats(dir / "x.f32", xs);
  write_floats(dir / "y.f32", ys);
  CheckpointData init;
  model->save_weights(init);
  write_checkpoint_file(dir / "init.h5", init);

  // ---- PyTorch ----
  const fs::path torch_out = dir / "torch";
  const std::string cmd =
      python + " " + quoted(script) + " --init " + quoted(dir / "init.h5") + " --x " +
      quoted(dir / "x.f32") + " --y " + quoted(dir / "y.f32") + " --sample-shape 28,28" +
      " --batch " + std::to_string(kBatch) + " --steps " + std::to_string(kSteps) + " --lr " +
      opt_cfg.at("learning_rate").dump() +
      (sgd ? std::string(" --optimizer sgd")
           : " --beta1 " + opt_cfg.at("beta_1").dump() + " --beta2 " + opt_cfg.at("beta_2").dump() +
                 " --epsilon " + opt_cfg.at("epsilon").dump()) +
      " --threads 1 --out " + quoted(torch_out);
  auto torch_run = test::run_command(cmd);
  ASSERT_EQ(torch_run.exit_code, 0) << cmd << "\n" << torch_run.out << torch_run.err;
  std::printf("%s", torch_run.out.c_str());
  const json manifest = json::parse(test::read_text(torch_out / "manifest.json"));
  const auto torch_losses = manifest.at("losses").get<std::vector<double>>();
  ASSERT_EQ(torch_losses.size(), static_cast<std::size_t>(kSteps));

  // ---- Tandem, then compare ----
  const auto losses = train(*model, *optimizer, *loss, batches);
  const auto diffs = compare_weights(*model, manifest, torch_out);
  int loss_step = 0;
  const double loss_diff = worst_loss_diff(losses, torch_losses, &loss_step);
  print_weights(
      (workload + ", 20 " + GetParam().optimizer + " steps, Tandem (a) vs PyTorch (b):").c_str(),
      diffs);
  std::printf(
      "  worst weight max|a-b|/max|b| = %.3g; worst loss |a-b|/|b| = %.3g at step %d "
      "(Tandem %.8f, torch %.8f); first loss %.6f, last loss %.6f\n",
      worst(diffs), loss_diff, loss_step + 1, losses[loss_step], torch_losses[loss_step],
      losses.front(), losses.back());
  for (const auto& d : diffs)
    EXPECT_LE(d.rel(), kBar) << d.name << ": max|tandem - torch| / max|torch| after " << kSteps
                             << " steps";
  for (int i = 0; i < kSteps; ++i)
    EXPECT_LE(std::fabs(losses[i] - torch_losses[i]) / std::fabs(torch_losses[i]), kBar)
        << "loss of step " << i + 1 << ": Tandem " << losses[i] << ", torch " << torch_losses[i];
  if (::testing::Test::HasFailure())
    for (int i = 0; i < kSteps; ++i)
      std::printf("  step %2d loss: Tandem %.8f torch %.8f (rel %.3g)\n", i + 1, losses[i],
                  torch_losses[i], std::fabs(losses[i] - torch_losses[i]) / torch_losses[i]);
  // Training did something: the loss fell. (The negative control below also fails unless the
  // updates moved the weights: a frozen model would match trivially.)
  EXPECT_LT(losses.back(), losses.front());

  // ---- negative control: a 10% larger learning rate must be caught by the same comparison ----
  json control_spec = rc.optimizer;
  control_spec["config"]["learning_rate"] = 1.1 * opt_cfg.at("learning_rate").get<double>();
  auto control_optimizer = make_optimizer(control_spec, "optimizer");
  const auto control_losses = train(*control, *control_optimizer, *loss, batches);
  const auto control_diffs = compare_weights(*control, manifest, torch_out);
  int control_step = 0;
  const double control_loss_diff = worst_loss_diff(control_losses, torch_losses, &control_step);
  print_weights("negative control, Tandem with a 10% larger lr (a) vs PyTorch (b):", control_diffs);
  std::printf("  worst weight max|a-b|/max|b| = %.3g; worst loss |a-b|/|b| = %.3g at step %d\n",
              worst(control_diffs), control_loss_diff, control_step + 1);
  for (const auto& d : control_diffs)
    EXPECT_GT(d.rel(), kBar) << d.name
                             << ": the comparison does not tell a 10% larger learning rate";
  EXPECT_GT(control_loss_diff, kBar)
      << "the loss comparison does not tell a 10% larger learning rate";
  std::fflush(stdout);
  // Keep the inputs and torch's outputs for investigation when something failed.
  if (!::testing::Test::HasFailure())
    fs::remove_all(dir);
  else
    std::printf("inputs and torch outputs kept in %s\n", dir.c_str());
}

INSTANTIATE_TEST_SUITE_P(Workloads, FashionOracle,
                         // fashion-cnn is checked with SGD: with Adam, rounding-sized gradient
                         // noise alone moves its weights by up to 2.7e-3 in 20 steps (PyTorch
                         // against itself: adam_sensitivity.py; see README.md).
                         ::testing::Values(OracleCase{"fashion-mlp", "adam"},
                                           OracleCase{"fashion-cnn", "sgd"}),
                         [](const auto& info) {
                           std::string n = info.param.workload + "_" + info.param.optimizer;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace tandem
