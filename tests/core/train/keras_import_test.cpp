// The compile settings of a Keras file as a run config (train/keras_import.hpp): the metric
// objects Keras 2 saves for a multi-output model after fit() carry the names it logged them by,
// "out1_mae" (the output's name prefixed, "_weighted_" for a weighted metric whose plain name was
// taken: Functional._set_metric_names); Tandem prefixes per-output names itself, so they import
// as the names compile() was given. Plain names are the user's and stay.
#include "train/keras_import.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// x (4) -> out1 (Dense 2), out2 (Dense 1).
json two_output_model() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "m", "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"name": "x", "batch_input_shape": [null, 4]},
       "inbound_nodes": []},
      {"class_name": "Dense", "name": "out1", "config": {"name": "out1", "units": 2},
       "inbound_nodes": [[["x", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "out2", "config": {"name": "out2", "units": 1},
       "inbound_nodes": [[["x", 0, 0, {}]]]}],
    "input_layers": [["x", 0, 0]], "output_layers": [["out1", 0, 0], ["out2", 0, 0]]},
    "keras_version": "2.15.0"})");
}

json wrapper(const std::string& name, const std::string& fn) {
  return {{"class_name", "MeanMetricWrapper"},
          {"config", {{"name", name}, {"dtype", "float32"}, {"fn", fn}}}};
}

TEST(KerasImport, AfterFitMetricNamesLoseTheOutputPrefixKerasGaveThem) {
  json training = {{"loss", {"mse", "mae"}},
                   {"optimizer_config", {{"class_name", "SGD"}, {"config", json::object()}}}};
  training["metrics"] = {{wrapper("out1_mae", "mean_absolute_error")},
                         {wrapper("out2_mse", "mean_squared_error"),
                          {{"class_name", "AUC"}, {"config", {{"name", "out2_auc"}}}}}};
  training["weighted_metrics"] = {{wrapper("out1_weighted_mae", "mean_absolute_error")},
                                  {wrapper("out2_mae", "mean_absolute_error")}};
  const KerasImport made = import_keras_configs(two_output_model(), training, "run");
  const json& metrics = made.config.at("metrics");
  ASSERT_EQ(metrics.size(), 2u) << metrics.dump();
  EXPECT_EQ(metrics[0], json({"mae"}));
  EXPECT_EQ(metrics[1][0], "mse");
  EXPECT_EQ(metrics[1][1]["config"]["name"], "auc");
  EXPECT_EQ(made.config.at("weighted_metrics"), json({{"mae"}, {"mae"}}));

  // A plain name is the user's: "out1_mae" is no metric Tandem knows.
  training["metrics"] = {{"out1_mae"}, json::array()};
  training.erase("weighted_metrics");
  try {
    import_keras_configs(two_output_model(), training, "run");
    FAIL() << "a plain name must stay as given";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'out1_mae'"), std::string::npos) << e.what();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
