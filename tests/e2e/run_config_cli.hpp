// A fixture for the e2e tests that drive one run config through the CLI (dir_/run.json, which
// the test's SetUp writes): train into a run folder, predict from a weights file, compare .npy
// outputs, and the check every such model owes contract 1 — trained on cpu:3 it ends where it
// ends on cpu:1, and one epoch then --resume ends where two epochs in one run end.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "test_support.hpp"

namespace tandem::test {

class RunConfigCli : public ::testing::Test {
 protected:
  /// Writes dir_/run.json: `model` (a Keras model config) as a binary classifier trained for
  /// two epochs of batches of 12 by Adam (0.01) on dir_/data.npz, validated on it too.
  void write_classifier_run(const nlohmann::json& model, const std::string& name) {
    const nlohmann::json data = {{"type", "npz"}, {"path", (dir_ / "data.npz").string()}};
    const nlohmann::json run = {
        {"name", name},
        {"seed", 4},
        {"epochs", 2},
        {"batch_size", 12},
        {"model", model},
        {"loss", "binary_crossentropy"},
        {"metrics", {"accuracy"}},
        {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
        {"data", {{"train", data}, {"validation", data}}}};
    write_text(dir_ / "run.json", run.dump(2));
  }
  /// `tandem train dir_/run.json` into dir_/<run>, quietly, with `more` arguments.
  CommandResult train(const std::string& run, const std::string& more = "") {
    return run_command(tandem_cli() + " train " + (dir_ / "run.json").string() + " --run-dir " +
                       (dir_ / run).string() + " -q " + more);
  }
  /// `tandem predict dir_/run.json` from `weights` into `output` (.npy).
  CommandResult predict(const std::filesystem::path& weights, const std::filesystem::path& output) {
    return run_command(tandem_cli() + " predict " + (dir_ / "run.json").string() + " --weights " +
                       weights.string() + " -o " + output.string());
  }
  ::testing::AssertionResult close(const std::filesystem::path& got,
                                   const std::filesystem::path& want, double rtol) {
    return npy_close(got, want, rtol, dir_);
  }
  /// Contract 1 through the CLI, from the weights file `start`: trained on cpu:3 the model
  /// predicts what the run in dir_/<trained> (two epochs on cpu:1 from `start`) predicts, given
  /// as `trained_npy`, and one epoch then --resume for the second predicts it bit for bit.
  void expect_layout_free_and_resumable(const std::filesystem::path& start,
                                        const std::filesystem::path& trained_npy) {
    auto three = train("three", "--weights " + start.string() + " --devices cpu:3");
    ASSERT_EQ(three.exit_code, 0) << three.err;
    ASSERT_EQ(predict(dir_ / "three" / "model.h5", dir_ / "three.npy").exit_code, 0);
    EXPECT_TRUE(close(dir_ / "three.npy", trained_npy, 1e-5));
    auto first = train("first", "--weights " + start.string() + " --set epochs=1");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    auto resumed =
        train("resumed", "--resume " + (dir_ / "first" / "model.h5").string() + " --set epochs=2");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    ASSERT_EQ(predict(dir_ / "resumed" / "model.h5", dir_ / "resumed.npy").exit_code, 0);
    EXPECT_TRUE(close(dir_ / "resumed.npy", trained_npy, 0.0));
  }
  std::filesystem::path dir_;
};

}  // namespace tandem::test
