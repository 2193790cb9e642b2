// Numbers, bytes and sizes the engine cannot honour, through the `tandem` binary (issue 23,
// items 2-4): each exits 2 naming the place, and `check --json` always prints one JSON object,
// where they used to train silently wrong (epochs 2^31 ran 0 epochs, batch_size 2^63-1 reported
// loss 0.0, an empty dataset "trained"), leak library errors as exit 1 (1e400, bytes that are
// not UTF-8, an IDX header promising 78 GB in a 116-byte file: std::bad_alloc) or resume a
// checkpoint whose epoch counter does not fit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::run_command;
namespace fs = std::filesystem;

// `tandem check CONFIG --json ARGS`: its exit code and the one JSON object it must print.
std::pair<int, json> check_json(const fs::path& config, const std::string& args) {
  const auto r = run_command(test::tandem_cli() + " check " + config.string() + " --json " + args);
  json out;
  try {
    out = json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "check --json printed no JSON (" << e.what() << "): " << r.out << r.err;
  }
  return {r.exit_code, out};
}

TEST(OutOfRangeCli, IntegersBeyondWhatTheEngineRunsAreConfigErrors) {
  const fs::path dir = test::scratch_dir("out-of-range-ints");
  test::write_text(dir / "tiny.json", test::tiny_regression_config().dump());
  const std::vector<std::pair<std::string, std::string>> cases{
      {"epochs=2147483648", "epochs"},
      {"batch_size=9223372036854775807", "batch_size"},
      {"batch_size_per_replica=4294967296", "batch_size_per_replica"},
      {"seed=18446744073709551615", "seed"},  // wrapped to -1 once
      {"data.train.samples=1099511627776", "data.train.samples"},  // std::bad_alloc at train
  };
  for (const auto& [set, path] : cases) {
    const auto [code, out] = check_json(dir / "tiny.json", "--set '" + set + "'");
    EXPECT_EQ(code, 2) << set;
    EXPECT_EQ(out["ok"], false) << set;
    EXPECT_EQ(out["path"], path) << set << ": " << out;
  }
  // The largest batch the engine takes is fine, and trains one batch of all 16 samples.
  const auto r = test::train_in(dir, "wide", [] {
    json c = test::tiny_regression_config();
    c["batch_size"] = 2147483647;
    return c;
  }());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json history = test::run_history(dir / "wide");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_GT(history[0]["loss"].get<double>(), 0.0);
}

TEST(OutOfRangeCli, CheckFindsDataThatDoesNotFitTheModelAsTrainDoes) {
  // `check` said ok to samples of 5 values for a model of 4 inputs, which train refuses.
  const fs::path dir = test::scratch_dir("check-data-fit");
  test::write_text(dir / "tiny.json", test::tiny_regression_config().dump());
  const auto [code, out] = check_json(dir / "tiny.json", "--set 'data.train.x_shape=[5]'");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out["error"].get<std::string>().find("samples of shape (None, 5) but model 's' expects (None, 4)"),
            std::string::npos)
      << out;
}

TEST(OutOfRangeCli, HugeNumbersAndBytesThatAreNotUtf8AreConfigErrors) {
  const fs::path dir = test::scratch_dir("out-of-range-text");
  std::string text = test::tiny_regression_config().dump();
  text.replace(text.find("\"epochs\":1"), 10, "\"epochs\":1e400");
  test::write_text(dir / "huge.json", text);
  auto [code, out] = check_json(dir / "huge.json", "");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out["error"].get<std::string>().find("number out of range"), std::string::npos) << out;

  test::write_text(dir / "tiny.json", test::tiny_regression_config().dump());
  std::tie(code, out) = check_json(
      dir / "tiny.json", R"(--set 'optimizer={"class_name": "SGD", "config": {"learning_rate": 1e400}}')");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(out["path"], "--set optimizer") << out;

  std::tie(code, out) = check_json(dir / "tiny.json", "--set \"name=$(printf 'a\\377')\"");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(out["path"], "--set name") << out;
  EXPECT_NE(out["error"].get<std::string>().find("not valid UTF-8"), std::string::npos) << out;

  // A config file with such a byte: the error quotes it, and the JSON still prints.
  std::string bad = test::tiny_regression_config().dump();
  bad.replace(bad.find("\"tiny\""), 6, "\"ti\xffy\"");
  test::write_text(dir / "bad-utf8.json", bad);
  std::tie(code, out) = check_json(dir / "bad-utf8.json", "");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out["error"].get<std::string>().find("ill-formed UTF-8"), std::string::npos) << out;
}

TEST(OutOfRangeCli, EmptyDatasetsAndOverpromisingIdxHeadersAreRefused) {
  const fs::path dir = test::scratch_dir("out-of-range-data");
  const auto made = run_command(std::string(test::system_python()) + " -c '\n"
      "import h5py, numpy as np, struct, sys\n"
      "d = sys.argv[1]\n"
      "with h5py.File(d + \"/empty.h5\", \"w\") as h:\n"
      "  h[\"x\"] = np.zeros((0, 4), np.float32); h[\"y\"] = np.zeros((0, 3), np.float32)\n"
      "open(d + \"/big-images.idx\", \"wb\").write(struct.pack(\">BBBBIII\", 0, 0, 8, 3, 100000000, 28, 28) + bytes(100))\n"
      "open(d + \"/labels.idx\", \"wb\").write(struct.pack(\">BBBBI\", 0, 0, 8, 1, 100000000) + bytes(10))\n' " +
      dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  test::write_text(dir / "tiny.json", test::tiny_regression_config().dump());
  auto [code, out] = check_json(
      dir / "tiny.json", "--set 'data.train={\"type\": \"hdf5\", \"path\": \"" +
                             (dir / "empty.h5").string() + "\", \"x\": \"x\", \"y\": \"y\"}'");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(out["path"], "data.train") << out;
  EXPECT_NE(out["error"].get<std::string>().find("at least one sample"), std::string::npos) << out;

  std::tie(code, out) = check_json(
      dir / "tiny.json", "--set 'data.train={\"type\": \"idx\", \"x\": \"" +
                             (dir / "big-images.idx").string() + "\", \"y\": \"" +
                             (dir / "labels.idx").string() + "\"}'");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out["error"].get<std::string>().find("truncated: header promises 78400000000 bytes"),
            std::string::npos)
      << out;
}

// Replaces the /tandem/state JSON of checkpoint `model` with what the Python expression `edit`
// makes of `state` (the stored JSON).
void edit_training_state(const fs::path& model, const std::string& edit) {
  const auto edited = run_command(std::string(test::system_python()) + " -c '\n"
      "import h5py, json, numpy as np, sys\n"
      "with h5py.File(sys.argv[1], \"r+\") as f:\n"
      "  state = json.loads(bytes(f[\"tandem/state\"][()]).decode())\n"
      "  state = " + edit + "\n"
      "  del f[\"tandem/state\"]\n"
      "  f[\"tandem/state\"] = np.frombuffer(json.dumps(state).encode(), np.uint8)\n' " +
      model.string());
  ASSERT_EQ(edited.exit_code, 0) << edited.err;
}

// A config in a folder whose name is not UTF-8: its data paths, made absolute from there, could
// not be written as JSON (config.json, every checkpoint), which ended `train` with the JSON
// library's message and an empty run folder. Refused naming the key, before any folder exists.
TEST(OutOfRangeCli, PathsThatAreNotUtf8AreRefusedNamingTheirKey) {
  const fs::path dir = test::scratch_dir("out-of-range-path") / "odd\xff";
  fs::create_directories(dir);
  json config = test::tiny_regression_config();
  config["data"]["train"] = {{"type", "npy"}, {"x", "x.npy"}, {"y", "y.npy"}};
  test::write_text(dir / "c.json", config.dump());
  auto [code, out] = check_json(dir / "c.json", "");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(out["path"], "data.train.x") << out;
  EXPECT_NE(out["error"].get<std::string>().find("is not valid UTF-8"), std::string::npos) << out;
  const auto r = run_command(test::tandem_cli() + " train " + (dir / "c.json").string() +
                             " -q --run-dir " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST(OutOfRangeCli, ATrainingStateOfTheWrongShapeIsAnErrorNamingItNotACrash) {
  const fs::path dir = test::scratch_dir("malformed-state");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  const fs::path model = dir / "run" / "model.h5";
  fs::copy_file(model, dir / "original.h5");

  // Found by checkpoint_fuzz: a state that is a number aborted in Trainer::restore.
  edit_training_state(model, "7");
  auto r = run_command(test::tandem_cli() + " train --resume " + model.string() + " -q");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/tandem/state is a JSON number, not an object"), std::string::npos)
      << r.err;

  // A meta-model state whose device_plan is not an object.
  fs::copy_file(dir / "original.h5", model, fs::copy_options::overwrite_existing);
  edit_training_state(model, "dict(state, target=\"meta\", device_plan=[1, 2])");
  r = run_command(test::tandem_cli() + " train --resume " + model.string() + " -q");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the training state's target or device_plan is malformed"),
            std::string::npos)
      << r.err;

  // inspect shows what it can of a state whose parts have the wrong types.
  fs::copy_file(dir / "original.h5", model, fs::copy_options::overwrite_existing);
  edit_training_state(model,
                      "dict(state, optimizer=3, history=[5, {\"loss\": 1.5}], "
                      "device_plan={\"plan\": 4})");
  r = run_command(test::tandem_cli() + " inspect " + model.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optimizer: ?"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device plan: ?"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("epoch 1: 5\n    epoch 2: loss 1.5000"), std::string::npos) << r.out;

  // Values far from 1 in e-notation: a diverging loss and a tiny rate were printed as 31 digits
  // cut short (1e30 read as 10^5 too small) and as 0.0000.
  fs::copy_file(dir / "original.h5", model, fs::copy_options::overwrite_existing);
  edit_training_state(model, "dict(state, history=[{\"loss\": 1.5e30, \"lr\": 2e-6}])");
  r = run_command(test::tandem_cli() + " inspect " + model.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("loss 1.5000e+30"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lr 2.0000e-06"), std::string::npos) << r.out;
}

TEST(OutOfRangeCli, ACheckpointWhoseCountersDoNotFitIsNotResumed) {
  const fs::path dir = test::scratch_dir("out-of-range-resume");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  const fs::path model = dir / "run" / "model.h5";
  // The training state with epoch 2^40 (it used to resume into "4 of 3 epochs").
  edit_training_state(model, "dict(state, epoch=2 ** 40)");
  const auto r = run_command(test::tandem_cli() + " train --resume " + model.string() +
                             " --set epochs=3 -q");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("epoch is 1099511627776, not an integer from 0 to 2147483647"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tandem
