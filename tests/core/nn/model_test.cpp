#include "tandem/model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "train/run_config.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json layer(const std::string& cls, json cfg) {
  return {{"class_name", cls}, {"config", cfg}};
}
json sequential(std::vector<json> layers) {
  return {{"class_name", "Sequential"}, {"config", {{"layers", layers}}}};
}

std::string config_error(const json& model) {
  return test::model_config_error(model);
}

TEST(Model, SeedMlpHasTheParameterCountKerasReports) {
  auto doc = load_json_file(test::source_dir() / "resources/configs/seed-mlp.json");
  auto model = Model::from_config(doc["model"], "model", 0);
  EXPECT_EQ(model->count_params(), 41157101);
  const std::string s = model->summary();
  EXPECT_NE(s.find("Total params: 41,157,101"), std::string::npos) << s;
  EXPECT_NE(s.find("dense (Dense)               (None, 4000)              32,004,000"),
            std::string::npos)
      << s;
}

TEST(Model, FashionMlpSummaryMatchesKeras) {
  auto doc = load_json_file(test::source_dir() / "resources/configs/fashion-mlp.json");
  auto model = Model::from_config(doc["model"], "model", 0);
  // Keras: 784*256+256 + 256*128+128 + 128*10+10 = 235,146.
  EXPECT_EQ(model->count_params(), 235146);
  EXPECT_EQ(model->input_shape(), (Shape{28, 28}));
  EXPECT_EQ(model->output_shape(), (Shape{10}));
  EXPECT_NE(model->summary().find("flatten (Flatten)           (None, 784)               0"),
            std::string::npos);
}

TEST(Model, FashionResnetIsAResNet20WithKerasParameterCounts) {
  auto doc = load_json_file(test::source_dir() / "resources/configs/fashion-resnet.json");
  auto model = Model::from_config(doc["model"], "model", 0);
  EXPECT_TRUE(model->functional());
  // By hand: the stem conv 3*3*1*16 and its BatchNormalization (4 x 16); per stage, three blocks
  // of two 3x3 convolutions and two BatchNormalizations, the first block of stages 2 and 3 with
  // a 1x1 projection and its BatchNormalization; the Dense 64 -> 10.
  const std::int64_t stem = 3 * 3 * 1 * 16 + 4 * 16;
  const std::int64_t stage1 = 3 * (2 * 3 * 3 * 16 * 16 + 2 * 4 * 16);
  const std::int64_t stage2 = (3 * 3 * 16 * 32 + 3 * 3 * 32 * 32 + 16 * 32 + 3 * 4 * 32) +
                              2 * (2 * 3 * 3 * 32 * 32 + 2 * 4 * 32);
  const std::int64_t stage3 = (3 * 3 * 32 * 64 + 3 * 3 * 64 * 64 + 32 * 64 + 3 * 4 * 64) +
                              2 * (2 * 3 * 3 * 64 * 64 + 2 * 4 * 64);
  const std::int64_t head = 64 * 10 + 10;
  EXPECT_EQ(model->count_params(), stem + stage1 + stage2 + stage3 + head);
  // The moving mean and variance of 16 + 6*16 + 7*32 + 7*64 channels are not trained.
  EXPECT_EQ(model->count_params() - model->count_trainable_params(),
            2 * (16 + 6 * 16 + 7 * 32 + 7 * 64));
  int adds = 0;
  EXPECT_EQ(model->call_count(), model->layer_count());  // no layer is called twice
  for (std::size_t k = 0; k < model->call_count(); ++k)
    if (model->layer(model->call_layer(k)).class_name() == "Add") {
      ++adds;
      EXPECT_EQ(model->call_inputs(k).size(), 2u) << model->layer(model->call_layer(k)).name();
    }
  EXPECT_EQ(adds, 9);
  EXPECT_EQ(model->output_shape(), (Shape{10}));
}

TEST(Model, InputShapeFromFirstLayerOrInputLayer) {
  auto a = Model::from_config(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}})}),
                              "model", 0);
  auto b =
      Model::from_config(sequential({layer("InputLayer", {{"batch_input_shape", {nullptr, 4}}}),
                                     layer("Dense", {{"units", 3}})}),
                         "model", 0);
  auto c = Model::from_config(sequential({layer("InputLayer", {{"batch_shape", {nullptr, 4}}}),
                                          layer("Dense", {{"units", 3}})}),
                              "model", 0);
  EXPECT_EQ(a->input_shape(), (Shape{4}));
  EXPECT_EQ(b->input_shape(), (Shape{4}));
  EXPECT_EQ(c->input_shape(), (Shape{4}));
  EXPECT_EQ(a->count_params(), 15);
  // Keras 2's input_dim: the first layer's is the input shape; a later layer's is ignored, as
  // Keras ignores it (with a warning); Embedding's input_dim stays its vocabulary.
  auto d = Model::from_config(sequential({layer("Dense", {{"units", 3}, {"input_dim", 4}}),
                                          layer("Dense", {{"units", 2}, {"input_dim", 9}})}),
                              "model", 0);
  EXPECT_EQ(d->input_shape(), (Shape{4}));
  EXPECT_EQ(d->count_params(), 15 + 8);
  auto e = Model::from_config(
      sequential({layer("Embedding", {{"input_dim", 10}, {"output_dim", 2}, {"input_shape", {5}}})}),
      "model", 0);
  EXPECT_EQ(e->input_shape(), (Shape{5}));
  EXPECT_THROW(Model::from_config(
                   sequential({layer("Dense", {{"units", 3}, {"input_dim", 0}})}), "model", 0),
               ConfigError);
  // A later layer's input shape (Keras 2 writes batch_input_shape for `input_shape=`) is ignored
  // as Keras ignores it; the first layer's must agree with the InputLayer's.
  auto f = Model::from_config(
      sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}}),
                  layer("Dense", {{"units", 2}, {"batch_input_shape", {nullptr, 16}}})}),
      "model", 0);
  EXPECT_EQ(f->input_shape(), (Shape{4}));
  EXPECT_EQ(f->count_params(), 15 + 8);
  EXPECT_NE(config_error(sequential({layer("InputLayer", {{"batch_shape", {nullptr, 4}}}),
                                     layer("Dense", {{"units", 3}, {"input_shape", {5}}})}))
                .find("'model.config.layers[1].config': gives the input shape (5,), but the "
                      "InputLayer gives (4,)"),
            std::string::npos);
  // tf.keras 2's Sequential built by model.build((None, 4)), with no Input: its config lists no
  // InputLayer and keeps the shape in build_input_shape (which a known input shape overrides);
  // the written config carries it on the first layer.
  json built = sequential({layer("Dense", {{"units", 3}})});
  built["config"]["build_input_shape"] = {nullptr, 4};
  auto g = Model::from_config(built, "model", 0);
  EXPECT_EQ(g->input_shape(), (Shape{4}));
  EXPECT_EQ(g->count_params(), 15);
  EXPECT_EQ(Model::from_config(g->config(), "model", 0)->input_shape(), (Shape{4}));
  built["config"]["layers"][0]["config"]["input_shape"] = {5};
  EXPECT_EQ(Model::from_config(built, "model", 0)->input_shape(), (Shape{5}));
  built["config"]["layers"][0]["config"].erase("input_shape");
  built["config"]["build_input_shape"] = {nullptr, 0};
  EXPECT_NE(config_error(built).find("'model.config.build_input_shape[1]': expected a positive "
                                     "dimension"),
            std::string::npos)
      << config_error(built);
}

// Token ids fed to an Embedding: Keras writes the InputLayer's dtype as an integer type. Tandem
// reads them as float32 (exact up to 2^24); a floating dtype other than float32 stays refused.
TEST(Model, AnInputLayerOfIntegersIsReadAsFloat32) {
  for (const char* dtype : {"int32", "int64", "uint8", "bool"}) {
    auto m = Model::from_config(
        sequential({layer("InputLayer", {{"batch_shape", {nullptr, 5}}, {"dtype", dtype}}),
                    layer("Embedding", {{"input_dim", 10}, {"output_dim", 2}})}),
        "model", 0);
    EXPECT_EQ(m->input_shape(), (Shape{5})) << dtype;
  }
  EXPECT_NE(config_error(sequential({layer("InputLayer",
                                           {{"batch_shape", {nullptr, 5}}, {"dtype", "float16"}}),
                                     layer("Dense", {{"units", 2}})}))
                .find("'model.config.layers[0].config.dtype'"),
            std::string::npos);
  for (const char* kind : {"sparse", "ragged"}) {
    EXPECT_NE(config_error(sequential({layer("InputLayer", {{"batch_shape", {nullptr, 5}},
                                                            {kind, true}}),
                                       layer("Dense", {{"units", 2}})}))
                  .find(std::string("'model.config.layers[0].config.") + kind + "'"),
              std::string::npos)
        << kind;
    EXPECT_NO_THROW(Model::from_config(
        sequential({layer("InputLayer", {{"batch_shape", {nullptr, 5}}, {kind, false}}),
                    layer("Dense", {{"units", 2}})}),
        "model", 0));
  }
}

// A layer's name is its group in checkpoints: one no HDF5 file can hold is refused before
// training (it used to fail writing the final checkpoint, losing the run).
TEST(Model, LayerNamesNoCheckpointCouldHoldAreRefusedAtTheirPath) {
  for (const std::string& name :
       {std::string("."), std::string(".."), std::string("a/b"), std::string("a\0b", 3),
        std::string(""), std::string(1025, 'x')}) {
    const std::string error =
        config_error(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}}),
                                 layer("Dense", {{"units", 1}, {"name", name}})}));
    EXPECT_NE(error.find("'model.config.layers[1].config.name'"), std::string::npos)
        << name.size() << ": " << error;
  }
  auto ok = Model::from_config(
      sequential(
          {layer("Dense", {{"units", 3}, {"input_shape", {4}}, {"name", std::string(1024, 'x')}})}),
      "model", 0);
  EXPECT_EQ(ok->layer(0).name().size(), 1024u);
}

TEST(Model, DefaultLayerNamesFollowKeras) {
  auto m = Model::from_config(
      sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}}),
                  layer("Dense", {{"units", 3}}), layer("Dropout", {{"rate", 0.1}}),
                  layer("Dense", {{"units", 1}})}),
      "model", 0);
  EXPECT_EQ(m->layer(0).name(), "dense");
  EXPECT_EQ(m->layer(1).name(), "dense_1");
  EXPECT_EQ(m->layer(2).name(), "dropout");
  EXPECT_EQ(m->layer(3).name(), "dense_2");
  EXPECT_EQ(m->parameter_names()[2], "dense_1/kernel");
}

TEST(Model, SameSeedSameWeightsDifferentSeedDifferentWeights) {
  json cfg = sequential({layer("Dense", {{"units", 8}, {"input_shape", {4}}})});
  auto a = Model::from_config(cfg, "model", 5), b = Model::from_config(cfg, "model", 5),
       c = Model::from_config(cfg, "model", 6);
  auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  bool differ = false;
  for (std::int64_t i = 0; i < pa[0]->value.size(); ++i) {
    EXPECT_EQ(pa[0]->value[i], pb[0]->value[i]);
    differ |= pa[0]->value[i] != pc[0]->value[i];
    // glorot_uniform limit sqrt(6 / (4 + 8)) ~ 0.7071
    EXPECT_LE(std::fabs(pa[0]->value[i]), 0.70711f);
  }
  EXPECT_TRUE(differ);
}

TEST(Model, ConfigErrorsNameTheJsonPath) {
  EXPECT_NE(config_error(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}}),
                                     layer("Conv9D", json::object())}))
                .find("'model.config.layers[1].class_name': unknown layer class 'Conv9D'"),
            std::string::npos);
  EXPECT_NE(config_error(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}}),
                                     layer("Functional", json::object())}))
                .find("'model.config.layers[0].config.name': a layer of a Sequential model that "
                      "holds whole models"),
            std::string::npos);
  EXPECT_NE(
      config_error(sequential({layer("Dense", {{"name", "d"}, {"units", 3}, {"input_shape", {4}}}),
                               layer("Functional", json::object())}))
          .find("'model.config.layers[1].config.layers': expected the list of layers of the "
                "model nested here"),
      std::string::npos);
  // A config of more layers than any model has (100 MB of them took gigabytes): refused first.
  const std::vector<json> too_many(100001, layer("Dense", {{"units", 1}}));
  EXPECT_NE(config_error(sequential(too_many))
                .find("'model.config.layers': 100001 layers; a model has at most 100000"),
            std::string::npos);
  EXPECT_NE(config_error(sequential({layer("Dense", {{"units", "3"}, {"input_shape", {4}}})}))
                .find("'model.config.layers[0].config.units': expected an integer, got a string"),
            std::string::npos);
  EXPECT_NE(config_error(sequential({layer("Dense", {{"input_shape", {4}}})}))
                .find("'model.config.layers[0].config.units': required key is missing"),
            std::string::npos);
  EXPECT_NE(
      config_error(
          sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}, {"activaton", "relu"}})}))
          .find("'model.config.layers[0].config.activaton': unknown key"),
      std::string::npos);
  EXPECT_NE(
      config_error(sequential({layer("Dense", {{"units", 3}})})).find("input shape is unknown"),
      std::string::npos);
  EXPECT_NE(config_error(
                sequential({layer(
                    "Dense", {{"units", 3}, {"input_shape", {4}}, {"kernel_regularizer", "l5"}})}))
                .find("'model.config.layers[0].config.kernel_regularizer'"),
            std::string::npos);
  EXPECT_NE(
      config_error(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}, {"name", "x"}}),
                               layer("Dense", {{"units", 3}, {"name", "x"}})}))
          .find("duplicate layer name 'x'"),
      std::string::npos);
  EXPECT_NE(config_error(json{{"class_name", "MyModel"}, {"config", json::object()}})
                .find("config error at 'model.class_name': expected \"Sequential\", "
                      "\"Functional\" or \"Model\", got \"MyModel\""),
            std::string::npos);
  EXPECT_NE(config_error(json{{"class_name", "Functional"}, {"config", json::object()}})
                .find("'model.config.layers'"),
            std::string::npos);
  EXPECT_NE(config_error(sequential(json::array())).find("no layers"), std::string::npos);
  EXPECT_NE(config_error(json("dense")).find("expected an object"), std::string::npos);
}

TEST(Model, ForwardRejectsWrongInputShape) {
  auto m = Model::from_config(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}})}),
                              "model", 0);
  EXPECT_THROW(m->forward(Tensor({2, 5}), false), ShapeError);
}

TEST(Model, WeightsRoundTripAndMismatchesAreNamed) {
  json cfg = sequential({layer("Flatten", {{"input_shape", {2, 2}}}),
                         layer("Dense", {{"units", 3}}), layer("Dense", {{"units", 2}})});
  auto a = Model::from_config(cfg, "model", 1), b = Model::from_config(cfg, "model", 2);
  CheckpointData data;
  a->save_weights(data);
  ASSERT_EQ(data.layers.size(), 3u);
  EXPECT_TRUE(data.layers[0].weights.empty());
  b->load_weights(data, "mem");
  EXPECT_EQ(b->parameters()[0]->value[0], a->parameters()[0]->value[0]);

  auto other = Model::from_config(
      sequential({layer("Flatten", {{"input_shape", {2, 2}}}), layer("Dense", {{"units", 4}}),
                  layer("Dense", {{"units", 2}})}),
      "model", 1);
  try {
    other->load_weights(data, "ckpt.h5");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt.h5: weight 'dense/kernel' has shape (4, 3)"),
              std::string::npos)
        << e.what();
  }

  // Weights of a run that diverged: refused, naming the weight, and nothing is loaded.
  const float before = b->parameters()[3]->value[0];
  for (const float bad : {std::nanf(""), -std::numeric_limits<float>::infinity()}) {
    CheckpointData diverged = data;
    diverged.layers[2].weights[1].value = diverged.layers[2].weights[1].value.clone();
    diverged.layers[2].weights[1].value[1] = bad;
    diverged.layers[1].weights[0].value = diverged.layers[1].weights[0].value.clone();
    diverged.layers[1].weights[0].value[0] = 7.0f;  // valid, and not loaded either
    try {
      b->load_weights(diverged, "nan.h5");
      ADD_FAILURE() << "loaded " << bad;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("nan.h5: weight 'dense_1/bias' holds " +
                                           std::string(std::isnan(bad) ? "NaN" : "Inf") +
                                           " (at value 1 of 2)"),
                std::string::npos)
          << e.what();
    }
    EXPECT_NE(b->parameters()[0]->value[0], 7.0f);
    EXPECT_EQ(b->parameters()[3]->value[0], before);
  }
}

TEST(Model, CloneCopiesWeightsIndependently) {
  auto a = Model::from_config(sequential({layer("Dense", {{"units", 3}, {"input_shape", {4}}})}),
                              "model", 1);
  auto b = a->clone();
  EXPECT_EQ(b->parameters()[0]->value[1], a->parameters()[0]->value[1]);
  b->parameters()[0]->value[1] += 1;
  EXPECT_NE(b->parameters()[0]->value[1], a->parameters()[0]->value[1]);
  EXPECT_EQ(a->config(), b->config());
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace TANDEM_TEST_FILE {

// Conv2D(relu) → MaxPooling2D hands relu's gradient to the pooling (which masks the 4× smaller
// pooled gradient); Conv2D → Activation(relu) → MaxPooling2D takes the unfused path. Same weights,
// same batch: the same outputs and gradients, to the bit.
TEST(Model, ReluGradientHandedToMaxPoolingGivesTheSameGradients) {
  auto layer = [](const std::string& cls, json cfg) {
    return json{{"class_name", cls}, {"config", cfg}};
  };
  auto model = [&](bool fused) {
    json layers = json::array({layer("InputLayer", {{"batch_shape", {nullptr, 9, 8, 3}}})});
    layers.push_back(layer("Conv2D", {{"name", "conv"},
                                      {"filters", 5},
                                      {"kernel_size", {3, 3}},
                                      {"padding", "same"},
                                      {"activation", fused ? "relu" : "linear"}}));
    if (!fused) layers.push_back(layer("Activation", {{"activation", "relu"}}));
    layers.push_back(layer("MaxPooling2D", {{"pool_size", {2, 2}}, {"padding", "same"}}));
    layers.push_back(layer("Flatten", json::object()));
    layers.push_back(layer("Dense", {{"name", "out"}, {"units", 3}}));
    return Model::from_config(
        {{"class_name", "Sequential"}, {"config", {{"name", "m"}, {"layers", layers}}}}, "model",
        5);
  };
  auto fused = model(true), plain = model(false);
  auto fp = fused->parameters(), pp = plain->parameters();
  ASSERT_EQ(fp.size(), pp.size());
  for (std::size_t i = 0; i < fp.size(); ++i) pp[i]->value.copy_from(fp[i]->value);

  Tensor x({4, 9, 8, 3});
  Rng rng(17);
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rng.uniform() * 2 - 1);
  Tensor g({4, 3});
  for (std::int64_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(rng.uniform() * 2 - 1);
  const Tensor yf = fused->forward(x, true).clone();
  const Tensor yp = plain->forward(x, true).clone();
  for (std::int64_t i = 0; i < yf.size(); ++i) ASSERT_EQ(yf[i], yp[i]) << i;
  fused->backward(g);
  plain->backward(g);
  int zero_windows = 0;
  for (std::size_t i = 0; i < fp.size(); ++i)
    for (std::int64_t k = 0; k < fp[i]->grad.size(); ++k)
      ASSERT_EQ(fp[i]->grad[k], pp[i]->grad[k]) << fp[i]->name << "[" << k << "]";
  // The check means something: some pooled windows are all-zero after relu (no gradient) and
  // some kernel gradients are non-zero.
  const Tensor& pooled = fused->layer(1).forward(fused->layer(0).forward(x, true), true);
  for (std::int64_t i = 0; i < pooled.size(); ++i) zero_windows += pooled[i] == 0.0f;
  EXPECT_GT(zero_windows, 0);
  double norm = 0;
  for (float v : fp[0]->grad.values()) norm += std::fabs(v);
  EXPECT_GT(norm, 0);
}

}  // namespace
}  // namespace tandem
