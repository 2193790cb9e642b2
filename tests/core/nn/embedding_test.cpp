#include "nn/embedding.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

// From backend/cpu/parallel.hpp, which the tests do not include: they are built without OpenMP and
// its `#pragma omp` would warn.
namespace tandem::cpu {
int compute_threads();
void set_compute_threads(int threads);
}  // namespace tandem::cpu

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

EmbeddingOptions options(std::int64_t input_dim, std::int64_t output_dim) {
  EmbeddingOptions o;
  o.input_dim = input_dim;
  o.output_dim = output_dim;
  return o;
}

TEST(Embedding, KerasWeightAndDefaultUniformInitializer) {
  Embedding e("embedding", options(1000, 16));
  Rng init(1);
  EXPECT_EQ(e.build({10}, init), (Shape{10, 16}));
  auto p = e.parameters();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]->name, "embeddings");
  EXPECT_EQ(p[0]->value.shape(), (Shape{1000, 16}));
  EXPECT_TRUE(p[0]->trainable);
  float lo = 1, hi = -1;
  for (float v : p[0]->value.values()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -0.05f);  // Keras "uniform": RandomUniform(-0.05, 0.05)
  EXPECT_LE(hi, 0.05f);
  EXPECT_LT(lo, -0.049f);
  EXPECT_GT(hi, 0.049f);
  const json cfg = e.config();
  EXPECT_EQ(cfg["input_dim"], 1000);
  EXPECT_EQ(cfg["output_dim"], 16);
  EXPECT_EQ(cfg["mask_zero"], false);
  EXPECT_EQ(cfg["embeddings_initializer"]["class_name"], "RandomUniform");
  EXPECT_EQ(cfg["embeddings_initializer"]["config"]["minval"], -0.05);
  EXPECT_EQ(cfg["embeddings_initializer"]["config"]["maxval"], 0.05);
  // Higher-rank inputs: (batch, a, b) -> (batch, a, b, output_dim), as Keras.
  Embedding e2("e2", options(5, 3));
  EXPECT_EQ(e2.build({2, 4}, init), (Shape{2, 4, 3}));
}

TEST(Embedding, LooksUpRowsAndAccumulatesRepeatedIndices) {
  Embedding e("emb", options(5, 3));
  Rng init(1);
  e.build({4}, init);
  Parameter& table = *e.parameters()[0];
  for (std::int64_t i = 0; i < table.value.size(); ++i) table.value[i] = static_cast<float>(i);
  Tensor x = Tensor::from_vector({2, 4}, {0, 2, 2, 4, 1, 0, 2, 3});
  const Tensor& y = e.forward(x, true);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3}));
  for (std::int64_t t = 0; t < 8; ++t)
    for (std::int64_t c = 0; c < 3; ++c)
      EXPECT_EQ(y[t * 3 + c], static_cast<float>(static_cast<std::int64_t>(x[t]) * 3 + c));

  Tensor g = test::random_tensor({2, 4, 3}, 7);
  table.grad.fill(123.0f);  // backward *sets* the grad: stale values must go
  const Tensor& gx = e.backward(g, false);
  EXPECT_TRUE(gx.empty());
  // Finite differences of L = sum w * table[x] (double reference) with respect to the table.
  auto xd = test::to_double(x), wd = test::to_double(g);
  auto loss = [&](const std::vector<double>& t) {
    double l = 0;
    for (std::size_t i = 0; i < xd.size(); ++i)
      for (std::size_t c = 0; c < 3; ++c)
        l += wd[i * 3 + c] * t[static_cast<std::size_t>(xd[i]) * 3 + c];
    return l;
  };
  test::expect_close(test::to_double(table.grad),
                     test::numeric_gradient(loss, test::to_double(table.value)), 1e-4, 1e-5,
                     "d/dembeddings");
  // Index 2 appears three times: the sum, in input order; index 0 twice; nothing looks up none.
  for (std::int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(table.grad[2 * 3 + c], (g[1 * 3 + c] + g[2 * 3 + c]) + g[6 * 3 + c]);
    EXPECT_EQ(table.grad[0 * 3 + c], g[0 * 3 + c] + g[5 * 3 + c]);
  }
}

TEST(Embedding, GradientIsBitwiseTheSameWhateverTheThreads) {
  const int saved = cpu::compute_threads();
  Tensor x({64, 64});
  Rng rng(2);
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rng.below(50));
  Tensor g = test::random_tensor({64, 64, 32}, 3);
  // Sequential accumulation in input order: what any thread count must reproduce exactly.
  std::vector<float> expected(50 * 32, 0.0f);
  for (std::int64_t i = 0; i < x.size(); ++i)
    for (std::int64_t c = 0; c < 32; ++c)
      expected[static_cast<std::size_t>(x[i]) * 32 + c] += g[i * 32 + c];
  for (int threads : {1, 2, 3}) {
    cpu::set_compute_threads(threads);
    Embedding e("emb", options(50, 32));
    Rng init(1);
    e.build({64}, init);
    e.forward(x, true);
    e.backward(g, false);
    const Tensor& grad = e.parameters()[0]->grad;
    EXPECT_EQ(std::memcmp(grad.data(), expected.data(), expected.size() * sizeof(float)), 0)
        << threads << " threads";
  }
  cpu::set_compute_threads(saved);
}

TEST(Embedding, BadIndicesAreDataErrorsNamingLayerPositionAndValue) {
  Embedding e("tokens", options(10, 2));
  Rng init(1);
  e.build({3}, init);
  auto message = [&](std::vector<float> values, std::int64_t offset = 0) -> std::string {
    e.set_sample_offset(offset);
    try {
      e.forward(Tensor::from_vector({2, 3}, values), true);
    } catch (const DataError& err) {
      return err.what();
    }
    return "(no error)";
  };
  std::string m = message({0, 1, 2, 3, 4, 10});
  EXPECT_NE(m.find("'tokens' (Embedding)"), std::string::npos) << m;
  EXPECT_NE(m.find("input[1, 2] = 10"), std::string::npos) << m;
  EXPECT_NE(m.find("outside [0, 10)"), std::string::npos) << m;
  m = message({0, -1, 2, 3, 4, 5}, 40);  // a replica's shard: the row in the global batch
  EXPECT_NE(m.find("input[40, 1] = -1"), std::string::npos) << m;
  m = message({0, 1, 2.5f, 3, 4, 5});
  EXPECT_NE(m.find("input[0, 2] = 2.5 is not an integer index"), std::string::npos) << m;
  m = message({0, 1, 2, std::nanf(""), 4, 5});
  EXPECT_NE(m.find("input[1, 0]"), std::string::npos) << m;
  EXPECT_EQ(message({0, 1, 2, 9, 9, 9}), "(no error)");
}

TEST(Embedding, HasNoInputGradient) {
  Embedding e("emb", options(4, 2));
  Rng init(1);
  e.build({3}, init);
  e.forward(Tensor({2, 3}), true);
  try {
    e.backward(Tensor({2, 3, 2}), true);
    FAIL();
  } catch (const ShapeError& err) {
    EXPECT_NE(std::string(err.what())
                  .find("'emb' (Embedding) has no gradient with respect to its "
                        "inputs"),
              std::string::npos)
        << err.what();
  }
  // In a model: an Embedding after a Dense would need one; training says so.
  auto m = Model::from_config(
      {{"class_name", "Sequential"},
       {"config",
        {{"layers",
          {{{"class_name", "Dense"},
            {"config", {{"units", 3}, {"input_shape", {2}}, {"kernel_initializer", "zeros"}}}},
           {{"class_name", "Embedding"}, {"config", {{"input_dim", 4}, {"output_dim", 2}}}}}}}}},
      "model", 0);
  m->forward(Tensor({5, 2}), true);  // the Dense outputs zeros: valid indices
  EXPECT_THROW(m->backward(Tensor({5, 3, 2})), ShapeError);
}

json embedding_model(json cfg) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "InputLayer"}, {"config", {{"batch_shape", {nullptr, 7}}}}},
              {{"class_name", "Embedding"}, {"config", cfg}}}}}}};
}
std::string config_error(json cfg) {
  try {
    Model::from_config(embedding_model(cfg), "model", 0);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Embedding, ReadsKerasConfigsAndNamesConfigErrorPaths) {
  // Keras 3's get_config(), verbatim.
  const json keras3 = {{"name", "embedding"},
                       {"trainable", true},
                       {"dtype", "float32"},
                       {"input_dim", 100},
                       {"output_dim", 8},
                       {"embeddings_initializer",
                        {{"module", "keras.initializers"},
                         {"class_name", "RandomUniform"},
                         {"config", {{"seed", nullptr}, {"minval", -0.05}, {"maxval", 0.05}}},
                         {"registered_name", nullptr}}},
                       {"embeddings_regularizer", nullptr},
                       {"activity_regularizer", nullptr},
                       {"embeddings_constraint", nullptr},
                       {"mask_zero", false}};
  auto m = Model::from_config(embedding_model(keras3), "model", 0);
  EXPECT_EQ(m->count_params(), 800);
  EXPECT_EQ(m->output_shape(), (Shape{7, 8}));
  EXPECT_EQ(Model::from_config(m->config(), "model", 0)->count_params(), 800);
  // A RandomUniform with other bounds, and tf.keras' input_length.
  const json bounded = {{"class_name", "RandomUniform"},
                        {"config", {{"minval", 0.5}, {"maxval", 1.0}}}};
  auto n = Model::from_config(embedding_model({{"input_dim", 100},
                                               {"output_dim", 8},
                                               {"input_length", 7},
                                               {"embeddings_initializer", bounded}}),
                              "model", 0);
  for (float v : n->parameters()[0]->value.values()) {
    EXPECT_GE(v, 0.5f);
    EXPECT_LE(v, 1.0f);
  }
  const std::string p = "'model.config.layers[1].config.";
  EXPECT_NE(config_error({{"output_dim", 8}}).find(p + "input_dim': required key is missing"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", "100"}, {"output_dim", 8}})
                .find(p + "input_dim': expected an integer"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", 100}, {"output_dim", 0}})
                .find(p + "output_dim': expected a positive integer"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", 100}, {"output_dim", 8}, {"mask_zero", "yes"}})
                .find(p + "mask_zero': expected"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", 100}, {"output_dim", 8}, {"output_dims", 8}})
                .find(p + "output_dims': unknown key"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", 100}, {"output_dim", 8}, {"lora_rank", 2}})
                .find(p + "lora_rank'"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", 100}, {"output_dim", 8}, {"activity_regularizer", "l9"}})
                .find(p + "activity_regularizer'"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", 100}, {"output_dim", 8}, {"embeddings_regularizer", 3}})
                .find(p + "embeddings_regularizer'"),
            std::string::npos);
  EXPECT_NE(config_error({{"input_dim", 100},
                          {"output_dim", 8},
                          {"embeddings_initializer",
                           {{"class_name", "RandomUniform"}, {"config", {{"minvall", 0}}}}}})
                .find(p + "embeddings_initializer.config.minvall': unknown key"),
            std::string::npos);
  const std::string e = config_error({{"input_dim", 100}, {"output_dim", 8}, {"input_length", 9}});
  EXPECT_NE(e.find("'model.config.layers[1]'"), std::string::npos) << e;
  EXPECT_NE(e.find("input_length 9"), std::string::npos) << e;
}

}  // namespace
}  // namespace tandem::nn
