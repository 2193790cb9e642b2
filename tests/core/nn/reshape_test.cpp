#include "nn/reshape.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

TEST(Reshape, IsAViewBothWays) {
  Reshape r("reshape", {4, 6});
  Rng init(0);
  EXPECT_EQ(r.build({2, 3, 4}, init), (Shape{4, 6}));
  EXPECT_TRUE(r.parameters().empty());
  Tensor x = test::random_tensor({5, 2, 3, 4}, 1);
  const Tensor& y = r.forward(x, true);
  EXPECT_EQ(y.shape(), (Shape{5, 4, 6}));
  EXPECT_EQ(y.data(), x.data());  // no copy
  Tensor g = test::random_tensor({5, 4, 6}, 2);
  const Tensor& gx = r.backward(g, true);
  EXPECT_EQ(gx.shape(), (Shape{5, 2, 3, 4}));
  EXPECT_EQ(gx.data(), g.data());
  EXPECT_TRUE(r.backward(g, false).empty());
  EXPECT_EQ(r.config()["target_shape"], json({4, 6}));
}

TEST(Reshape, InfersOneMinusOneDimension) {
  Rng init(0);
  Reshape a("a", {-1, 3});
  EXPECT_EQ(a.build({12}, init), (Shape{4, 3}));
  Reshape b("b", {2, -1, 2});
  EXPECT_EQ(b.build({3, 4}, init), (Shape{2, 3, 2}));
  Reshape c("c", {-1});
  EXPECT_EQ(c.build({3, 4, 5}, init), (Shape{60}));
  EXPECT_EQ(c.config()["target_shape"], json({-1}));  // kept as configured, as Keras
  const Tensor& y = b.forward(Tensor({7, 3, 4}), false);
  EXPECT_EQ(y.shape(), (Shape{7, 2, 3, 2}));
  // An empty batch (a replica's empty shard) reshapes too.
  EXPECT_EQ(b.forward(Tensor({0, 3, 4}), true).shape(), (Shape{0, 2, 3, 2}));
}

TEST(Reshape, ElementCountMismatchNamesTheLayer) {
  Rng init(0);
  for (Shape target : {Shape{5, 3}, Shape{-1, 5}, Shape{-1, -1}, Shape{0, 12}}) {
    Reshape r("to_grid", target);
    try {
      r.build({3, 4}, init);
      FAIL() << shape_to_string(target);
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("'to_grid' (Reshape)"), std::string::npos) << e.what();
    }
  }
  Reshape r("to_grid", {5, 3});
  try {
    r.build({3, 4}, init);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(None, 3, 4) (12 values per sample)"), std::string::npos)
        << e.what();
  }
  Reshape ok("ok", {6, 2});
  ok.build({3, 4}, init);
  try {
    ok.forward(Tensor({2, 4, 3}), true);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'ok' (Reshape) expects inputs (None, 3, 4)"),
              std::string::npos)
        << e.what();
  }
}

json layer(const std::string& cls, json cfg) {
  return {{"class_name", cls}, {"config", cfg}};
}
std::string config_error(json layers) {
  try {
    Model::from_config({{"class_name", "Sequential"}, {"config", {{"layers", layers}}}}, "model",
                       0);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Reshape, ConfigErrorsNameTheJsonPath) {
  const json input = layer("InputLayer", {{"batch_shape", {nullptr, 3, 4}}});
  EXPECT_NE(config_error({input, layer("Reshape", json::object())})
                .find("'model.config.layers[1].config.target_shape': required key is missing"),
            std::string::npos);
  EXPECT_NE(config_error({input, layer("Reshape", {{"target_shape", "12"}})})
                .find("'model.config.layers[1].config.target_shape': expected a list"),
            std::string::npos);
  EXPECT_NE(config_error({input, layer("Reshape", {{"target_shape", {-1, -1}}})})
                .find("'model.config.layers[1].config.target_shape[1]': only one dimension may be "
                      "-1"),
            std::string::npos);
  EXPECT_NE(config_error({input, layer("Reshape", {{"target_shape", {4, 0}}})})
                .find("'model.config.layers[1].config.target_shape[1]': expected a positive"),
            std::string::npos);
  EXPECT_NE(config_error({input, layer("Reshape", {{"target_shape", {12}}, {"traget", 1}})})
                .find("'model.config.layers[1].config.traget': unknown key"),
            std::string::npos);
  // The element count is checked when the model is built: the error names layer and path.
  const std::string e = config_error({input, layer("Reshape", {{"target_shape", {5, -1}}})});
  EXPECT_NE(e.find("'model.config.layers[1]'"), std::string::npos) << e;
  EXPECT_NE(e.find("'reshape' (Reshape)"), std::string::npos) << e;
  EXPECT_NE(e.find("12 is not a multiple of 5"), std::string::npos) << e;
  // A valid one builds, and its config reads back.
  auto m = Model::from_config(
      {{"class_name", "Sequential"},
       {"config", {{"layers", {input, layer("Reshape", {{"target_shape", {2, -1}}})}}}}},
      "model", 0);
  EXPECT_EQ(m->output_shape(), (Shape{2, 6}));
  EXPECT_EQ(Model::from_config(m->config(), "model", 0)->output_shape(), (Shape{2, 6}));
}

}  // namespace
}  // namespace tandem::nn
