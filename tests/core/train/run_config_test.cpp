#include "train/run_config.hpp"

#include <gtest/gtest.h>

#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json minimal() {
  return {
      {"model", json::object()}, {"loss", "mse"}, {"data", {{"train", {{"type", "synthetic"}}}}}};
}

std::string error_of(const json& cfg) {
  try {
    parse_run_config(cfg, "/base");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RunConfig, DefaultsAreFilledIn) {
  RunConfig rc = parse_run_config(minimal(), "/base");
  EXPECT_EQ(rc.epochs, 1);
  EXPECT_EQ(rc.batch_size, 32);
  EXPECT_TRUE(rc.data.shuffle);
  EXPECT_EQ(rc.resolved["batch_size"], 32);
  EXPECT_EQ(rc.optimizer, json("adam"));
}

TEST(RunConfig, BatchSizePerReplicaScalesWithThePlan) {
  json cfg = minimal();
  EXPECT_EQ(parse_run_config(cfg, "/base").global_batch_size(4), 32);  // batch_size is global
  cfg["batch_size_per_replica"] = 16;
  RunConfig rc = parse_run_config(cfg, "/base");
  EXPECT_EQ(rc.global_batch_size(1), 16);
  EXPECT_EQ(rc.global_batch_size(3), 48);
  EXPECT_EQ(rc.resolved["batch_size_per_replica"], 16);
  EXPECT_FALSE(rc.resolved.contains("batch_size"));
}

TEST(RunConfig, PrecisionIsFp32UnlessAnotherIsAskedFor) {
  json cfg = minimal();
  RunConfig rc = parse_run_config(cfg, "/base");
  EXPECT_EQ(rc.precision, Precision::fp32);
  EXPECT_EQ(rc.resolved["precision"], "fp32");
  cfg["precision"] = "tf32";
  rc = parse_run_config(cfg, "/base");
  EXPECT_EQ(rc.precision, Precision::tf32);
  EXPECT_EQ(rc.resolved["precision"], "tf32");
  EXPECT_TRUE(rc.precision_given);
  for (const json& bad : {json("fp8"), json("TF32"), json("mixed_bfloat16"), json(""), json(32),
                          json::array()}) {
    cfg["precision"] = bad;
    const std::string e = error_of(cfg);
    EXPECT_NE(e.find("'precision'"), std::string::npos) << bad << ": " << e;
  }
  // Whether a device computes bf16 or fp16 is the device plan's question (ReplicaModel).
  EXPECT_EQ(parse_precision("bf16", "x"), Precision::bf16);
  EXPECT_EQ(parse_precision("fp16", "x"), Precision::fp16);
  EXPECT_EQ(parse_precision("tf32", "x"), Precision::tf32);
  cfg.erase("precision");
  EXPECT_FALSE(parse_run_config(cfg, "/base").precision_given);
}

TEST(RunConfig, RelativeDataPathsResolveAgainstTheConfigFolder) {
  json cfg = minimal();
  cfg["data"]["train"] = {{"type", "idx"}, {"x", "data/x.gz"}, {"y", "/abs/y.gz"}};
  cfg["data"]["validation"] = {{"type", "hdf5"}, {"path", "v.h5"}, {"x", "images"}};
  RunConfig rc = parse_run_config(cfg, "/base");
  EXPECT_EQ(rc.data.train["x"], "/base/data/x.gz");
  EXPECT_EQ(rc.data.train["y"], "/abs/y.gz");
  EXPECT_EQ(rc.data.validation["path"], "/base/v.h5");
  EXPECT_EQ(rc.data.validation["x"], "images");  // an HDF5 dataset name, not a file
}

TEST(RunConfig, OverridesSetNestedValuesAndListItems) {
  json cfg = load_json_file(test::source_dir() / "resources/configs/fashion-mlp.json");
  apply_override(cfg, "epochs=10");
  apply_override(cfg, "optimizer.config.learning_rate=0.01");
  apply_override(cfg, "model.config.layers[2].config.units=64");
  apply_override(cfg, "name=my run");
  apply_override(cfg, "data.validation_split=0.1");
  EXPECT_EQ(cfg["epochs"], 10);
  EXPECT_EQ(cfg["optimizer"]["config"]["learning_rate"], 0.01);
  EXPECT_EQ(cfg["model"]["config"]["layers"][2]["config"]["units"], 64);
  EXPECT_EQ(cfg["name"], "my run");
  EXPECT_THROW(apply_override(cfg, "epochs"), ConfigError);
  EXPECT_THROW(apply_override(cfg, "model.config.layers[99].config.units=1"), ConfigError);
  EXPECT_THROW(apply_override(cfg, "epochs.deeper=1"), ConfigError);
  // What opens as JSON must be JSON (a typo is not a string), and a number must fit a double.
  const auto refused = [&](const std::string& assignment, const std::string& words) {
    try {
      apply_override(cfg, assignment);
      ADD_FAILURE() << "accepted " << assignment;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(R"(optimizer={"class_name":)",
          "'--set optimizer': the value is not valid JSON (parse "
          "error at line 1, column 15");
  refused("callbacks=[1, 2", "'--set callbacks': the value is not valid JSON");
  // A dot forgotten after an index (it was read as if there; the path said something else).
  refused("model.config.layers[1]config.units=3",
          "'--set model.config.layers[1]config.units': expected '.' or '[' after "
          "'model.config.layers[1]', got 'config.units'");
  // A setting inside a string form names the string and the object form that has settings.
  json short_form = cfg;
  short_form["optimizer"] = "adam";
  try {
    apply_override(short_form, "optimizer.config.learning_rate=3e-4");
    ADD_FAILURE() << "set inside a string";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config error at 'optimizer': is \"adam\", not an object"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("{\"class_name\""), std::string::npos) << e.what();
  }
  refused(R"(name="run)", "'--set name': the value is not valid JSON");
  refused("optimizer.config.learning_rate=1e400",
          "'--set optimizer.config.learning_rate': the value: a number out of range: 1e400 is "
          "beyond what a double holds");
  apply_override(cfg, "name=run {2}");  // plain text, braces inside: a string
  EXPECT_EQ(cfg["name"], "run {2}");
}

TEST(RunConfig, ErrorsNameThePath) {
  json c = minimal();
  c["epochs"] = 0;
  EXPECT_NE(error_of(c).find("'epochs': expected an integer from 1 to 2147483647, got 0"), std::string::npos);
  c = minimal();
  c["batch_size"] = "big";
  EXPECT_NE(error_of(c).find("'batch_size': expected an integer, got a string"), std::string::npos);
  c = minimal();
  c["epoch"] = 3;
  EXPECT_NE(error_of(c).find("'epoch': unknown key"), std::string::npos);
  c = minimal();
  c.erase("loss");
  EXPECT_NE(error_of(c).find("'loss': required key is missing"), std::string::npos);
  c = minimal();
  c["data"]["validation_split"] = 1.5;
  EXPECT_NE(error_of(c).find("'data.validation_split'"), std::string::npos);
  c = minimal();
  c["data"]["validation_split"] = 0.1;
  c["data"]["validation"] = {{"type", "synthetic"}};
  EXPECT_NE(error_of(c).find("not both"), std::string::npos);
  c = minimal();
  c["batch_size"] = 64;
  c["batch_size_per_replica"] = 32;
  EXPECT_NE(error_of(c).find("'batch_size_per_replica': give batch_size"), std::string::npos);
  c = minimal();
  c["batch_size_per_replica"] = 0;
  EXPECT_NE(error_of(c).find("'batch_size_per_replica': expected an integer from 1 to 2147483647, got 0"),
            std::string::npos);
  EXPECT_NE(error_of(json::array()).find("expected an object"), std::string::npos);
}

TEST(RunConfig, BadJsonFileGivesLineAndColumn) {
  auto dir = test::scratch_dir("badjson");
  test::write_text(dir / "bad.json", "{\n  \"epochs\": 3,\n  \"name\": oops\n}\n");
  try {
    load_json_file(dir / "bad.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_json_file(dir / "missing.json"), ConfigError);
}

}  // namespace
}  // namespace tandem
