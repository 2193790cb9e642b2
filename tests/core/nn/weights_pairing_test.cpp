// Model::load_weights pairs a file's layers with the model's: by name in any order, from a
// template nested in a multi_gpu_model wrapper, or by order as Keras does; mismatches name the
// file and the layer.
#include <gtest/gtest.h>

#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::unique_ptr<Model> model(std::uint64_t seed, const char* first = "a",
                             const char* second = "b") {
  return Model::from_config(
      json{{"class_name", "Sequential"},
           {"config",
            {{"name", "s"},
             {"layers",
              {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 4}}}}},
               {{"class_name", "Dense"}, {"config", {{"name", first}, {"units", 3}}}},
               {{"class_name", "Dense"}, {"config", {{"name", second}, {"units", 2}}}}}}}}},
      "model", seed);
}

bool same_weights(Model& x, Model& y) {
  auto px = x.parameters(), py = y.parameters();
  for (std::size_t i = 0; i < px.size(); ++i)
    for (std::int64_t k = 0; k < px[i]->value.size(); ++k)
      if (px[i]->value[k] != py[i]->value[k]) return false;
  return true;
}

TEST(WeightsPairing, ByNameInAnyOrderNestedOrByOrder) {
  auto source = model(1);
  CheckpointData saved;
  source->save_weights(saved);

  CheckpointData reversed = saved;  // the same layers listed the other way round
  std::reverse(reversed.layers.begin(), reversed.layers.end());
  auto by_name = model(2);
  ASSERT_FALSE(same_weights(*by_name, *source));
  EXPECT_EQ(by_name->load_weights(reversed, "reversed.h5"), "");
  EXPECT_TRUE(same_weights(*by_name, *source));

  CheckpointData nested;  // multi_gpu_model: input, slices, the template, the merge
  nested.layers = {{"input_1", {}}, {"lambda_1", {}}, {"sequential_1", {}}, {"dense_2", {}}};
  for (const LayerWeights& lw : saved.layers)
    for (const NamedTensor& w : lw.weights)
      nested.layers[2].weights.push_back({lw.layer + "/" + w.name, w.value});
  auto unwrapped = model(3);
  EXPECT_EQ(unwrapped->load_weights(nested, "wrapped.h5"),
            "a multi_gpu_model file: loaded the weights of the template model nested as its "
            "layer 'sequential_1'");
  EXPECT_TRUE(same_weights(*unwrapped, *source));

  auto renamed = model(4, "dense", "dense_1");  // other names: paired by order, as Keras does
  EXPECT_EQ(renamed->load_weights(saved, "other-names.h5"),
            "its layers are named otherwise than the model's: their weights were paired by "
            "order, as Keras' load_weights pairs them ('a' to 'dense', 'b' to 'dense_1')");
  EXPECT_TRUE(same_weights(*renamed, *source));

  CheckpointData short_nested = nested;
  short_nested.layers[2].weights.resize(2);  // the template's second layer is missing
  try {
    model(5)->load_weights(short_nested, "cut.h5");
    FAIL() << "a wrapper without every layer of the model must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.h5: holds weights for 1 layers, but model 's' has 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
