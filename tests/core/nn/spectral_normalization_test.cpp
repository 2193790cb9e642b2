// SpectralNormalization (nn/spectral_normalization.hpp): one iteration by hand (a diagonal
// kernel, the definition written in double), many iterations against the largest singular value
// (NumPy's SVD), the wrapped
// layer's output and gradient at the divided kernel, inference and an all-zero kernel left
// alone, configs and refusals at their place, and the Keras 3 weight paths.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "nn/keras3_weight_paths.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json wrap(const char* cls, json config, json extra = json::object()) {
  extra["layer"] = {{"class_name", cls}, {"config", std::move(config)}};
  return extra;
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

struct Built {
  std::unique_ptr<Layer> layer;
  Parameter *kernel, *bias, *u;
};

Built dense(int units, std::int64_t features, json extra = json::object()) {
  Built b{test::make_layer("SpectralNormalization", wrap("Dense", {{"units", units}}, extra)),
          nullptr, nullptr, nullptr};
  Rng init(3);
  b.layer->build({features}, init);
  const auto params = b.layer->parameters();
  EXPECT_EQ(params.size(), 3u);
  b.kernel = params[0];
  b.bias = params[1];
  b.u = params[2];
  return b;
}

TEST(SpectralNormalization, OneIterationDividesTheKernelByItsEstimateByHand) {
  Built b = dense(2, 2);
  EXPECT_EQ(b.u->name, "vector_u");
  EXPECT_FALSE(b.u->trainable);
  EXPECT_EQ(b.u->value.shape(), (Shape{1, 2}));
  b.kernel->value = Tensor::from_vector({2, 2}, {3, 0, 0, 1});
  b.bias->value = Tensor::from_vector({2}, {0.5f, -1});
  b.u->value = Tensor::from_vector({1, 2}, {0.8f, 0.6f});
  // Inference leaves the kernel alone: y = x W + b.
  const Tensor x = Tensor::from_vector({1, 2}, {1, 2});
  EXPECT_EQ(values(b.layer->forward(x, false)), (std::vector<float>{3.5f, 1}));
  EXPECT_EQ(values(b.kernel->value), (std::vector<float>{3, 0, 0, 1}));
  // u = (0.8, 0.6): v = normalize(u Wᵀ) = normalize(2.4, 0.6), u = normalize(v W) ∝ (7.2, 0.6)
  // — not yet (1, 0), so σ = v W uᵀ is a little under 3: computed here in double.
  const double v0 = 2.4 / std::hypot(2.4, 0.6), v1 = 0.6 / std::hypot(2.4, 0.6);
  const double n = std::hypot(3 * v0, v1), u0 = 3 * v0 / n, u1 = v1 / n;
  const double sigma = 3 * v0 * u0 + v1 * u1;
  const std::vector<float> y = values(b.layer->forward(x, true));
  EXPECT_FLOAT_EQ(b.kernel->value[0], static_cast<float>(3 / sigma));
  EXPECT_FLOAT_EQ(b.kernel->value[3], static_cast<float>(1 / sigma));
  EXPECT_EQ(b.kernel->value[1], 0.0f);
  EXPECT_FLOAT_EQ(b.u->value[0], static_cast<float>(u0));
  EXPECT_FLOAT_EQ(b.u->value[1], static_cast<float>(u1));
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(3 / sigma + 0.5));
  EXPECT_FLOAT_EQ(y[1], static_cast<float>(2 / sigma - 1));
  // An all-zero kernel stays, and so does u.
  b.kernel->value.fill(0.0f);
  const std::vector<float> u_before = values(b.u->value);
  b.layer->forward(x, true);
  EXPECT_EQ(values(b.kernel->value), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(values(b.u->value), u_before);
}

// Many iterations converge on the largest singular value: the divided kernel's is 1 (NumPy's
// SVD of the kernel the layer keeps); the gradient is the plain Dense's at that kernel.
TEST(SpectralNormalization, PowerIterationsReachTheLargestSingularValue) {
  Built b = dense(4, 7, {{"power_iterations", 60}});
  b.kernel->value = test::random_tensor({7, 4}, 9, -1, 1);
  const Tensor x = test::random_tensor({5, 7}, 1);
  const Tensor y = b.layer->forward(x, true).clone();
  const auto dir = test::scratch_dir("spectral-svd");
  test::write_text(dir / "kernel.json", json(values(b.kernel->value)).dump());
  const auto r = test::run_python(
      dir / "svd.py",
      "import json, numpy as np, sys\n"
      "k = np.array(json.load(open(sys.argv[1])), dtype=np.float64).reshape(7, 4)\n"
      "print('%.9f' % np.linalg.svd(k, compute_uv=False)[0])\n",
      (dir / "kernel.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(std::stod(r.out), 1.0, 1e-5);
  // The wrapped layer ran at the divided kernel: a plain Dense given it computes the same.
  auto plain = test::make_layer("Dense", {{"units", 4}});
  Rng init(1);
  plain->build({7}, init);
  plain->parameters()[0]->value.copy_from(b.kernel->value);
  plain->parameters()[1]->value.copy_from(b.bias->value);
  EXPECT_EQ(values(plain->forward(x, true)), values(y));
  const Tensor dy = test::random_tensor({5, 4}, 2);
  EXPECT_EQ(values(b.layer->backward(dy, true)), values(plain->backward(dy, true)));
  EXPECT_EQ(values(b.kernel->grad), values(plain->parameters()[0]->grad));
}

TEST(SpectralNormalization, ConfigsReadBackAndBadValuesAreNamed) {
  const json given =
      wrap("Conv2D", {{"filters", 3}, {"kernel_size", 2}}, {{"power_iterations", 3}});
  const json written = test::make_layer("SpectralNormalization", given)->config();
  EXPECT_EQ(written["power_iterations"], 3);
  EXPECT_EQ(written["layer"]["class_name"], "Conv2D");
  EXPECT_EQ(written["layer"]["config"]["filters"], 3);
  EXPECT_EQ(test::layer_config_error("SpectralNormalization", written), "(no error)");
  EXPECT_NE(test::layer_config_error("SpectralNormalization",
                                     wrap("Dense", {{"units", 2}}, {{"power_iterations", 0}}))
                .find("'layer.config.power_iterations'"),
            std::string::npos);
  EXPECT_NE(test::layer_config_error("SpectralNormalization", json::object())
                .find("'layer.config.layer'"),
            std::string::npos);
  EXPECT_NE(test::layer_config_error("SpectralNormalization", wrap("Dense", {{"units", "two"}}))
                .find("'layer.config.layer.config.units'"),
            std::string::npos);
  EXPECT_NE(test::layer_config_error("SpectralNormalization", wrap("Denser", json::object()))
                .find("'layer.config.layer.class_name': unknown layer class 'Denser'"),
            std::string::npos);
  auto dropout = test::make_layer("SpectralNormalization", wrap("Dropout", {{"rate", 0.5}}));
  Rng init(1);
  try {
    dropout->build({4}, init);
    ADD_FAILURE() << "a Dropout was wrapped";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(SpectralNormalization) wraps a Dropout, which has no "
                                         "kernel nor embeddings to normalize"),
              std::string::npos)
        << e.what();
  }
  // Embedding's embeddings are its kernel; Keras 3 keeps the wrapped weights under `layer`.
  auto embedding = test::make_layer("SpectralNormalization",
                                    wrap("Embedding", {{"input_dim", 9}, {"output_dim", 4}}));
  embedding->build({3}, init);
  EXPECT_EQ(embedding->parameters().back()->value.shape(), (Shape{1, 4}));
  EXPECT_EQ(nn::keras3_weight_names(*embedding, {"embeddings", "vector_u"}),
            (std::vector<std::string>{"layer/0", "0"}));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
