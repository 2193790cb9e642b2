// GroupedQueryAttention (nn/multi_head_attention.hpp): the layer is MultiHeadAttention whose key
// and value heads each serve a group of query heads — checked against a MultiHeadAttention
// given those heads repeated (Keras' ops.repeat), outputs and every gradient, the repeated
// heads' gradients summed; its weights' shapes, its config written back, refusals at their
// place. (Against torch: LayerOracle.GroupedQueryAttentionMatchesPyTorch; ONNX:
// OnnxExportOracle.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::map<std::string, Parameter*> by_name(Layer& layer) {
  std::map<std::string, Parameter*> out;
  for (Parameter* p : layer.parameters()) out[p->name] = p;
  return out;
}

// Head h of `grouped` (.., kv heads, dim) repeated `repeats` times in place: (.., heads, dim).
Tensor repeat_heads(const Tensor& grouped, std::int64_t repeats) {
  const Shape s = grouped.shape();
  const std::int64_t kv = s[s.size() - 2], dim = s.back(), outer = grouped.size() / (kv * dim);
  Shape out_shape = s;
  out_shape[s.size() - 2] = kv * repeats;
  Tensor out(out_shape);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t h = 0; h < kv * repeats; ++h)
      for (std::int64_t d = 0; d < dim; ++d)
        out[(o * kv * repeats + h) * dim + d] = grouped[(o * kv + h / repeats) * dim + d];
  return out;
}

// The gradient of repeat_heads: each group's heads summed.
std::vector<double> sum_groups(const Tensor& repeated, std::int64_t repeats) {
  const Shape s = repeated.shape();
  const std::int64_t heads = s[s.size() - 2], dim = s.back(),
                     outer = repeated.size() / (heads * dim);
  std::vector<double> out(static_cast<std::size_t>(repeated.size() / repeats), 0.0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t d = 0; d < dim; ++d)
        out[static_cast<std::size_t>((o * heads / repeats + h / repeats) * dim + d)] +=
            repeated[(o * heads + h) * dim + d];
  return out;
}

TEST(GroupedQueryAttention, IsMultiHeadAttentionWithItsKeyValueHeadsRepeated) {
  for (const bool use_bias : {true, false}) {
    SCOPED_TRACE(use_bias ? "with biases" : "without biases");
    auto gqa = test::make_layer("GroupedQueryAttention", {{"head_dim", 3},
                                                          {"num_query_heads", 6},
                                                          {"num_key_value_heads", 2},
                                                          {"use_bias", use_bias}});
    auto mha = test::make_layer("MultiHeadAttention",
                                {{"num_heads", 6}, {"key_dim", 3}, {"use_bias", use_bias}});
    Rng init(1);
    const std::vector<Shape> shapes{{5, 4}, {7, 4}};
    EXPECT_EQ(gqa->build_inputs(shapes, init), (Shape{5, 4}));
    mha->build_inputs(shapes, init);
    auto g = by_name(*gqa), m = by_name(*mha);
    EXPECT_EQ(g.at("key/kernel")->value.shape(), (Shape{4, 2, 3}));
    EXPECT_EQ(g.at("value/kernel")->value.shape(), (Shape{4, 2, 3}));
    EXPECT_EQ(g.at("attention_output/kernel")->value.shape(), (Shape{6, 3, 4}));
    std::uint64_t seed = 10;
    for (auto& [name, p] : g) {
      p->value = test::random_tensor(p->value.shape(), ++seed);
      const bool repeated = name.rfind("key/", 0) == 0 || name.rfind("value/", 0) == 0;
      m.at(name)->value = repeated ? repeat_heads(p->value, 3) : p->value.clone();
    }
    const Tensor query = test::random_tensor({2, 5, 4}, 1),
                 value = test::random_tensor({2, 7, 4}, 2);
    const Tensor y = gqa->forward_inputs({&query, &value}, true).clone();
    const Tensor want = mha->forward_inputs({&query, &value}, true).clone();
    test::expect_close(test::to_double(y), test::to_double(want), 1e-5, 1e-6, "output");
    const Tensor dy = test::random_tensor({2, 5, 4}, 3);
    for (auto& [name, p] : g) p->grad.fill(0.0f);
    for (auto& [name, p] : m) p->grad.fill(0.0f);
    const auto dg = gqa->backward_inputs(dy, true);
    const std::vector<double> d_query = test::to_double(*dg[0]), d_value = test::to_double(*dg[1]);
    const auto dm = mha->backward_inputs(dy, true);
    test::expect_close(d_query, test::to_double(*dm[0]), 1e-5, 1e-6, "d query");
    test::expect_close(d_value, test::to_double(*dm[1]), 1e-5, 1e-6, "d value");
    for (auto& [name, p] : g) {
      const bool repeated = name.rfind("key/", 0) == 0 || name.rfind("value/", 0) == 0;
      test::expect_close(
          test::to_double(p->grad),
          repeated ? sum_groups(m.at(name)->grad, 3) : test::to_double(m.at(name)->grad), 1e-5,
          1e-6, "d " + name);
    }
  }
}

TEST(GroupedQueryAttention, ConfigReadsBackAndBadValuesAreNamed) {
  const json given{{"head_dim", 4},
                   {"num_query_heads", 8},
                   {"num_key_value_heads", 2},
                   {"dropout", 0.1},
                   {"use_bias", false},
                   {"seed", 3},
                   {"flash_attention", nullptr}};
  const json written = test::make_layer("GroupedQueryAttention", given)->config();
  for (const char* key :
       {"head_dim", "num_query_heads", "num_key_value_heads", "dropout", "use_bias", "seed"})
    EXPECT_EQ(written[key], given[key]) << key;
  EXPECT_FALSE(written.contains("key_dim"));
  EXPECT_EQ(test::layer_config_error("GroupedQueryAttention", written), "(no error)");
  const auto error = [](json change) {
    json c{{"head_dim", 4}, {"num_query_heads", 4}, {"num_key_value_heads", 2}};
    c.update(change);
    for (auto it = c.begin(); it != c.end();)
      it = it.value() == "(remove)" ? c.erase(it) : std::next(it);
    return test::layer_config_error("GroupedQueryAttention", c);
  };
  EXPECT_NE(error({{"num_key_value_heads", 3}})
                .find("'layer.config.num_key_value_heads': 3 key/value heads do not divide 4 "
                      "query heads (num_query_heads)"),
            std::string::npos);
  EXPECT_NE(error({{"head_dim", "(remove)"}}).find("'layer.config.head_dim'"), std::string::npos);
  EXPECT_NE(error({{"num_query_heads", 0}}).find("'layer.config.num_query_heads'"),
            std::string::npos);
  EXPECT_NE(error({{"dropout", 1.5}}).find("'layer.config.dropout'"), std::string::npos);
  EXPECT_NE(error({{"kernel_regularizer", {{"class_name", "L2"}}}})
                .find("'layer.config.kernel_regularizer'"),
            std::string::npos);
  EXPECT_NE(error({{"flash_attention", "on"}})
                .find("'layer.config.flash_attention': expected null or a boolean"),
            std::string::npos);
  EXPECT_NE(error({{"key_dim", 4}}).find("key_dim"), std::string::npos);
}

TEST(GroupedQueryAttention, ShapesItCannotTakeAreNamed) {
  auto layer =
      test::make_layer("GroupedQueryAttention",
                       {{"head_dim", 2}, {"num_query_heads", 2}, {"num_key_value_heads", 1}});
  Rng init(1);
  try {
    layer->build_inputs({{5, 4}, {4}}, init);
    ADD_FAILURE() << "a value of one axis was taken";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(GroupedQueryAttention): the value must be a sequence"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
