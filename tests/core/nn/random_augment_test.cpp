// Keras' random preprocessing layers (RandomTranslation, RandomRotation, RandomZoom,
// RandomCrop, RandomContrast, RandomBrightness) and the backend operations under them:
// transforms whose results are known exactly (whole-pixel shifts with each fill mode as
// TensorFlow documents them, quarter turns, zoom 0, crop windows), RandomCrop's inference resize
// against PyTorch's bilinear interpolate, the warp gradient as the transform's adjoint, the
// colour adjustments against their formula and finite differences, per-sample draws keyed by
// the sample's global index, and configs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "backend/ops.hpp"
#include "gradient_check.hpp"
#include "nn/random_color.hpp"
#include "nn/random_warp.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using backend::AdjustDesc;
using backend::WarpDesc;
using nlohmann::json;

WarpDesc warp_desc(int kind, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                   std::int64_t channels) {
  WarpDesc d;
  d.kind = kind;
  d.batch = batch;
  d.rows = d.out_rows = d.src_rows = rows;
  d.cols = d.out_cols = d.src_cols = cols;
  d.channels = channels;
  return d;
}

// Draws for every sample: u0, u1 each.
Tensor draws_of(std::int64_t batch, float u0, float u1) {
  Tensor t({batch, WarpDesc::kDraws});
  for (std::int64_t n = 0; n < batch; ++n) {
    t[2 * n] = u0;
    t[2 * n + 1] = u1;
  }
  return t;
}

Tensor warp(const WarpDesc& d, const Tensor& draws, const Tensor& x) {
  Tensor y({d.batch, d.out_rows, d.out_cols, d.channels});
  backend::cpu_backend().warp_images(d, draws, x, y);
  return y;
}

// A 1 x 1 x 5 x 1 image 1..5 shifted right by 2 (translation -0.4 of the width) with each fill
// mode; TensorFlow's documentation of fill_mode gives the expected rows.
TEST(RandomWarp, WholePixelShiftsFillAsTensorFlowDocumentsEachMode) {
  Tensor x({1, 1, 5, 1});
  for (int i = 0; i < 5; ++i) x[i] = static_cast<float>(i + 1);
  WarpDesc d = warp_desc(WarpDesc::translate, 1, 1, 5, 1);
  d.lo1 = d.hi1 = 0.4f;  // width factor 0.4: output column j reads input column j - 2
  const Tensor u = draws_of(1, 0.5f, 0.5f);
  const std::vector<std::pair<int, std::vector<float>>> cases = {
      {WarpDesc::reflect, {2, 1, 1, 2, 3}},  // (d c b a | a b c d | d c b a)
      {WarpDesc::wrap, {4, 5, 1, 2, 3}},     // (a b c d | a b c d | a b c d)
      {WarpDesc::nearest_edge, {1, 1, 1, 2, 3}},
      {WarpDesc::constant, {-7, -7, 1, 2, 3}},
  };
  for (const auto& [fill, expected] : cases)
    for (int interpolation : {WarpDesc::bilinear, WarpDesc::nearest}) {
      d.fill = fill;
      d.fill_value = -7;
      d.interpolation = interpolation;
      const Tensor y = warp(d, u, x);
      for (int j = 0; j < 5; ++j)
        EXPECT_NEAR(y[j], expected[j], 1e-5)
            << "fill " << fill << " interpolation " << interpolation << " column " << j;
    }
}

TEST(RandomWarp, AQuarterTurnIsNumPysRot90AndZoomZeroTheIdentity) {
  const Tensor x = test::random_tensor({2, 5, 5, 3}, 1);
  WarpDesc d = warp_desc(WarpDesc::rotate, 2, 5, 5, 3);
  d.lo0 = d.hi0 = 0.25f;  // a quarter of a turn
  const Tensor y = warp(d, draws_of(2, 0.3f, 0.9f), x);
  // Keras' rotation matrix maps output (i, j) to input (j, 4 - i) for a quarter turn: the image
  // turned counter-clockwise as displayed (rows down), np.rot90(x, k=1) of each sample.
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t i = 0; i < 5; ++i)
      for (std::int64_t j = 0; j < 5; ++j)
        for (std::int64_t c = 0; c < 3; ++c)
          ASSERT_NEAR(y[((n * 5 + i) * 5 + j) * 3 + c], x[((n * 5 + j) * 5 + (4 - i)) * 3 + c],
                      1e-5)
              << n << " " << i << " " << j;
  WarpDesc z = warp_desc(WarpDesc::zoom, 2, 5, 5, 3);
  z.width_follows_height = true;
  const Tensor same = warp(z, draws_of(2, 0.7f, 0.1f), x);
  for (std::int64_t e = 0; e < x.size(); ++e) ASSERT_NEAR(same[e], x[e], 1e-6) << e;
}

// RandomCrop: each sample's window starts at floor(u * (spare + 1)); at inference the centred
// window of the target's aspect ratio resized as PyTorch's bilinear interpolate resizes it.
TEST(RandomWarp, CropsAreWindowsAndTheInferenceResizeIsPyTorchsBilinear) {
  const Tensor x = test::random_tensor({1, 9, 7, 2}, 2);
  WarpDesc d = warp_desc(WarpDesc::crop, 1, 9, 7, 2);
  d.out_rows = 4;
  d.out_cols = 3;
  d.interpolation = WarpDesc::nearest;
  d.fill = WarpDesc::constant;
  const Tensor y = warp(d, draws_of(1, 0.99f, 0.2f), x);  // top 5 (of 0..5), left 1 (of 0..4)
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t c = 0; c < 2; ++c)
        ASSERT_EQ(y[(i * 3 + j) * 2 + c], x[((5 + i) * 7 + 1 + j) * 2 + c]);

  RandomWarp crop("crop", d, 4, 3, 1, json::object());
  Rng init(0);
  ASSERT_EQ(crop.build({9, 7, 2}, init), (Shape{4, 3, 2}));
  const Tensor resized = crop.forward(x, false).clone();
  const std::filesystem::path dir = test::scratch_dir("crop-resize");
  {
    std::ofstream f(dir / "x.f32", std::ios::binary);
    f.write(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  }
  // Keras' smart_resize: a 9x7 image to 4:3 keeps the full width, rows 9 - (7 * 4 / 3 = 9) -> 9.
  test::write_text(dir / "ref.py",
                   "import numpy as np, torch\n"
                   "x = np.fromfile('x.f32', np.float32).reshape(9, 7, 2)\n"
                   "h, w = 9, 7\n"
                   "ch = min(h, int(w * 4 / 3)); cw = min(w, int(h * 3 / 4))\n"
                   "t, l = int((h - ch) / 2), int((w - cw) / 2)\n"
                   "win = torch.from_numpy(x[t:t + ch, l:l + cw].copy()).permute(2, 0, 1)[None]\n"
                   "y = torch.nn.functional.interpolate(win, size=(4, 3), mode='bilinear', "
                   "align_corners=False)\n"
                   "y[0].permute(1, 2, 0).numpy().astype(np.float32).tofile('y.f32')\n");
  const auto r =
      test::run_command("cd " + dir.string() + " && " + test::system_python() + " ref.py");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir / "y.f32", std::ios::binary);
  std::vector<float> expected(resized.size());
  in.read(reinterpret_cast<char*>(expected.data()), expected.size() * sizeof(float));
  ASSERT_TRUE(in);
  for (std::int64_t e = 0; e < resized.size(); ++e) ASSERT_NEAR(resized[e], expected[e], 1e-5) << e;
}

// A warp is linear in x (fill value 0): its gradient is its adjoint, <W x, g> = <x, W^T g>, for
// every kind, interpolation and fill mode, at random draws.
TEST(RandomWarp, TheGradientIsTheAdjointOfEveryWarp) {
  const Tensor x = test::random_tensor({3, 6, 5, 2}, 3);
  const Tensor u = test::random_tensor({3, WarpDesc::kDraws}, 4, 0.0f, 1.0f);
  for (int kind : {WarpDesc::translate, WarpDesc::rotate, WarpDesc::zoom})
    for (int interpolation : {WarpDesc::bilinear, WarpDesc::nearest})
      for (int fill :
           {WarpDesc::reflect, WarpDesc::wrap, WarpDesc::constant, WarpDesc::nearest_edge}) {
        WarpDesc d = warp_desc(kind, 3, 6, 5, 2);
        d.lo0 = d.lo1 = -0.3f;
        d.hi0 = d.hi1 = 0.4f;
        d.interpolation = interpolation;
        d.fill = fill;
        const Tensor y = warp(d, u, x);
        const Tensor g = test::random_tensor(y.shape(), 5);
        Tensor dx(x.shape());
        backend::cpu_backend().warp_images_backward(d, u, g, dx);
        double forward = 0, adjoint = 0;
        for (std::int64_t e = 0; e < y.size(); ++e) forward += static_cast<double>(y[e]) * g[e];
        for (std::int64_t e = 0; e < x.size(); ++e) adjoint += static_cast<double>(x[e]) * dx[e];
        EXPECT_NEAR(forward, adjoint, 1e-4 * (1 + std::fabs(forward)))
            << "kind " << kind << " interpolation " << interpolation << " fill " << fill;
      }
}

Tensor adjust(const AdjustDesc& d, const Tensor& u, const Tensor& x, Tensor* means = nullptr) {
  Tensor y(x.shape()), m({d.batch, d.channels});
  backend::cpu_backend().adjust_images(d, u, x, m, y);
  if (means) *means = m;
  return y;
}

TEST(RandomColor, ContrastAndBrightnessFollowKerasFormulaAndTheirGradientsFiniteDifferences) {
  const std::int64_t batch = 2, rows = 3, cols = 4, channels = 2;
  const Tensor x = test::random_tensor({batch, rows, cols, channels}, 6, 0.0f, 1.0f);
  Tensor u({batch, 1});
  u[0] = 0.25f;
  u[1] = 0.9f;
  for (int kind : {AdjustDesc::contrast, AdjustDesc::brightness}) {
    AdjustDesc d;
    d.kind = kind;
    d.batch = batch;
    d.rows = rows;
    d.cols = cols;
    d.channels = channels;
    d.lo = kind == AdjustDesc::contrast ? 0.5f : -0.4f;
    d.hi = kind == AdjustDesc::contrast ? 1.7f : 0.4f;
    d.value_lo = 0.1f;
    d.value_hi = 0.9f;
    const Tensor y = adjust(d, u, x);
    for (std::int64_t n = 0; n < batch; ++n)
      for (std::int64_t c = 0; c < channels; ++c) {
        double mean = 0;
        for (std::int64_t p = 0; p < rows * cols; ++p)
          mean += x[(n * rows * cols + p) * channels + c];
        mean /= rows * cols;
        const double f = d.lo + (d.hi - d.lo) * u[n];
        for (std::int64_t p = 0; p < rows * cols; ++p) {
          const std::int64_t e = (n * rows * cols + p) * channels + c;
          const double v = kind == AdjustDesc::contrast ? (x[e] - mean) * f + mean : x[e] + f * 0.8;
          ASSERT_NEAR(y[e], std::clamp(v, 0.1, 0.9), 1e-6) << kind << " " << e;
        }
      }
    // Finite differences of sum(y * g) with the draws held.
    const Tensor g = test::random_tensor(y.shape(), 7);
    Tensor means, dx(x.shape());
    adjust(d, u, x, &means);
    backend::cpu_backend().adjust_images_backward(d, u, x, means, g, dx);
    const auto loss = [&](const Tensor& at) {
      const Tensor out = adjust(d, u, at);
      double s = 0;
      for (std::int64_t e = 0; e < out.size(); ++e) s += static_cast<double>(out[e]) * g[e];
      return s;
    };
    const double h = 1e-3;
    for (std::int64_t e = 0; e < x.size(); ++e) {
      Tensor plus = x.clone(), minus = x.clone();
      plus[e] += static_cast<float>(h);
      minus[e] -= static_cast<float>(h);
      const double numeric = (loss(plus) - loss(minus)) / (2 * h);
      // Values right at a clip edge have no derivative; none of these random ones is within h.
      EXPECT_NEAR(dx[e], numeric, 2e-3) << "kind " << kind << " value " << e;
    }
  }
}

json model_with(const json& layer) {
  return {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 8, 6, 3}}}}},
          layer,
          {{"class_name", "Flatten"}, {"config", json::object()}}}}}}};
}

std::string error_of(const json& layer) {
  try {
    Model::from_config(model_with(layer), "model", 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Each layer in training: a sample's draws depend on its global index, not on the batch it is
// in; at inference the identity (RandomCrop: the resize); configs round-trip; bad keys named.
TEST(RandomAugment, DrawsFollowTheSampleAndConfigsRoundTrip) {
  const std::vector<json> layers = {
      {{"class_name", "RandomTranslation"},
       {"config", {{"height_factor", 0.2}, {"width_factor", {-0.1, 0.3}}, {"seed", 4}}}},
      {{"class_name", "RandomRotation"},
       {"config", {{"factor", 0.1}, {"fill_mode", "constant"}, {"seed", 4}}}},
      {{"class_name", "RandomZoom"},
       {"config", {{"height_factor", {-0.2, 0.1}}, {"fill_mode", "nearest"}, {"seed", 4}}}},
      {{"class_name", "RandomCrop"}, {"config", {{"height", 5}, {"width", 4}, {"seed", 4}}}},
      {{"class_name", "RandomContrast"},
       {"config", {{"factor", 0.3}, {"value_range", {0, 1}}, {"seed", 4}}}},
      {{"class_name", "RandomBrightness"},
       {"config", {{"factor", {-0.2, 0.2}}, {"value_range", {0, 1}}, {"seed", 4}}}},
  };
  const Tensor x = test::random_tensor({6, 8, 6, 3}, 8, 0.0f, 1.0f);
  for (const json& layer : layers) {
    SCOPED_TRACE(layer.dump());
    auto whole = Model::from_config(model_with(layer), "model", 1);
    auto part = Model::from_config(model_with(layer), "model", 1);
    Layer& a = whole->layer(0);
    Layer& b = part->layer(0);
    const Tensor all = a.forward(x, true).clone();
    b.set_sample_offset(2);
    const std::int64_t cell = 8 * 6 * 3;
    const Tensor rows = b.forward(Tensor::view(x, 2 * cell, {4, 8, 6, 3}), true).clone();
    const std::int64_t out_cell = all.size() / 6;
    for (std::int64_t e = 0; e < rows.size(); ++e) ASSERT_EQ(rows[e], all[2 * out_cell + e]) << e;
    bool changed = all.size() != x.size();
    for (std::int64_t e = 0; !changed && e < x.size(); ++e) changed = all[e] != x[e];
    EXPECT_TRUE(changed);
    const Tensor& inference = a.forward(x, false);
    if (layer["class_name"] != "RandomCrop") {
      EXPECT_EQ(inference.data(), x.data());
    }
    const json c = whole->config()["config"]["layers"][1]["config"];
    for (auto it = layer["config"].begin(); it != layer["config"].end(); ++it)
      EXPECT_EQ(c[it.key()], it.value()) << it.key();
    auto again = Model::from_config(whole->config(), "model", 1);
    EXPECT_EQ(again->layer(0).class_name(), layer["class_name"]);
  }
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"class_name", "RandomTranslation"},
        {"config", {{"height_factor", 1.5}, {"width_factor", 0}}}},
       "config.height_factor"},
      {{{"class_name", "RandomTranslation"}, {"config", {{"height_factor", 0.1}}}},
       "config.width_factor"},
      {{{"class_name", "RandomRotation"}, {"config", {{"factor", {0.3, 0.1}}}}}, "config.factor"},
      {{{"class_name", "RandomRotation"}, {"config", {{"factor", 0.1}, {"fill_mode", "mirror"}}}},
       "config.fill_mode"},
      {{{"class_name", "RandomZoom"}, {"config", {{"height_factor", -1.5}}}},
       "config.height_factor"},
      {{{"class_name", "RandomCrop"}, {"config", {{"height", 0}, {"width", 4}}}}, "config.height"},
      {{{"class_name", "RandomContrast"}, {"config", {{"factor", "high"}}}}, "config.factor"},
      {{{"class_name", "RandomContrast"}, {"config", {{"factor", 0.2}, {"value_range", {1, 0}}}}},
       "config.value_range"},
      {{{"class_name", "RandomBrightness"}, {"config", {{"factor", 2}}}}, "config.factor"},
  };
  for (const auto& [layer, where] : bad)
    EXPECT_NE(error_of(layer).find(where), std::string::npos)
        << layer.dump() << ": " << error_of(layer);
}

}  // namespace
}  // namespace tandem::nn
