// The checkpoint plugin: each option's behaviour, the index, events, targets and the file format.
// Crash safety and resuming through the CLI are in checkpoint_crash_test.cpp.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "io/hdf5_lock.hpp"
#include "plugins/plugin_test_support.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

Logs make_logs(std::initializer_list<std::pair<const char*, double>> items) {
  Logs logs;
  for (const auto& [k, v] : items) logs.set(k, v);
  return logs;
}

// The checkpoint files (*.h5, not temporary files) in `dir`.
std::set<std::string> h5_files(const fs::path& dir) {
  std::set<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.front() != '.' && e.path().extension() == ".h5")
      out.insert(name);
  }
  return out;
}

json index_of(const fs::path& dir) {
  std::ifstream in(dir / "checkpoints.json");
  if (!in) return json::array();
  return json::parse(in).at("checkpoints");
}

std::set<std::string> index_files(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : index_of(dir)) out.insert(e.at("file").get<std::string>());
  return out;
}

std::vector<json> saved_events(const fs::path& run_dir) {
  std::vector<json> out;
  for (const auto& e : read_events(run_dir))
    if (e["event"] == "checkpoint_saved") out.push_back(e);
  return out;
}

std::vector<const Tensor*> weights_of(const CheckpointData& data) {
  std::vector<const Tensor*> out;
  for (const auto& l : data.layers)
    for (const auto& w : l.weights) out.push_back(&w.value);
  return out;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(float)) == 0;
}

// True when the checkpoint's weights are bitwise the model's.
bool same_weights(const CheckpointData& data, Model& model) {
  const auto file = weights_of(data);
  const auto params = model.parameters();
  if (file.size() != params.size()) return false;
  for (std::size_t i = 0; i < file.size(); ++i)
    if (!same_tensor(*file[i], params[i]->value)) return false;
  return true;
}

// Calls the callback's hooks directly, with logs chosen by the test: exact control over the
// monitored values, no training needed.
struct Driver {
  explicit Driver(const json& options, Target t = Target::template_model,
                  const std::string& plan = "cpu:1")
      : run(plan), target(t) {
    cb = run.add("checkpoint", options, t);
    run.trainer->select_target(target);
    cb->on_train_begin(*run.trainer, Logs{});
  }
  void epoch_end(int epoch, const Logs& logs) {
    run.trainer->select_target(target);
    cb->on_epoch_end(*run.trainer, epoch, logs);
  }
  void train_end() {
    run.trainer->select_target(target);
    cb->on_train_end(*run.trainer, Logs{});
  }
  PluginRun run;
  Target target;
  std::shared_ptr<Callback> cb;
};

// The epochs (1-based) whose file "b/<epoch>.h5" exists after epoch ends with `values` of
// `monitor`.
std::vector<int> saved_epochs(json options, const std::string& monitor,
                              const std::vector<double>& values) {
  options["filepath"] = "b/{epoch}.h5";
  if (!options.contains("monitor")) options["monitor"] = monitor;
  Driver d(options);
  for (std::size_t i = 0; i < values.size(); ++i) {
    Logs logs;
    logs.set("loss", 1.0);
    logs.set(monitor, values[i]);
    d.epoch_end(static_cast<int>(i), logs);
  }
  d.train_end();
  std::vector<int> out;
  for (const auto& f : h5_files(d.run.run_dir / "b")) out.push_back(std::stoi(f));
  std::sort(out.begin(), out.end());
  for (const auto& e : index_of(d.run.run_dir / "b")) EXPECT_TRUE(e["best"].get<bool>()) << e;
  return out;
}

TEST(CheckpointPlugin, SchemaListsEveryOptionWithTypeDefaultAndDescription) {
  PluginHost host;
  const PluginInfo info = host.load("checkpoint").record.info;
  EXPECT_EQ(info.name, "checkpoint");
  const json& props = info.options_schema.at("properties");
  const std::set<std::string> expected = {"filepath",
                                          "monitor",
                                          "mode",
                                          "save_best_only",
                                          "save_weights_only",
                                          "save_freq",
                                          "initial_value_threshold",
                                          "verbose",
                                          "save_top_k",
                                          "save_last",
                                          "every_n_epochs",
                                          "period",
                                          "train_time_interval",
                                          "async"};
  std::set<std::string> names;
  for (auto it = props.begin(); it != props.end(); ++it) {
    names.insert(it.key());
    EXPECT_TRUE(it.value().contains("type")) << it.key();
    EXPECT_TRUE(it.value().contains("default")) << it.key();
    EXPECT_FALSE(it.value().value("description", "").empty()) << it.key();
  }
  EXPECT_EQ(names, expected);
  EXPECT_EQ(props["monitor"]["default"], "val_loss");
  EXPECT_EQ(props["save_freq"]["default"], "epoch");
  EXPECT_EQ(props["save_top_k"]["minimum"], -1);
}

TEST(CheckpointPlugin, BadOptionsAreConfigErrorsNamingTheOption) {
  PluginRun run;
  auto message = [&](const json& options) -> std::string {
    try {
      run.add("checkpoint", options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message({{"save_freq", "batch"}}).find("options.save_freq"), std::string::npos);
  EXPECT_NE(message({{"save_freq", 0}}).find("options.save_freq"), std::string::npos);
  EXPECT_NE(message({{"mode", "up"}}).find("options.mode"), std::string::npos);
  EXPECT_NE(message({{"save_top_k", -2}}).find("options.save_top_k"), std::string::npos);
  EXPECT_NE(message({{"save_best", true}}).find("unknown option"), std::string::npos);
  EXPECT_NE(message({{"filepath", "ck/{epoch.h5"}}).find("options.filepath"), std::string::npos);
  EXPECT_NE(message({{"filepath", "ck/{}.h5"}}).find("options.filepath"), std::string::npos);
  EXPECT_NE(message({{"filepath", "ck/{epoch:02q}.h5"}}).find("unknown format type"),
            std::string::npos);
  // {batch} exists only when saving by batch.
  EXPECT_NE(message({{"filepath", "{epoch}-{batch}.h5"}}).find("{batch}"), std::string::npos);
  EXPECT_EQ(message({{"filepath", "{epoch}-{batch}.h5"}, {"save_freq", 3}}), "no error");
  // One trigger per callback.
  EXPECT_NE(message({{"save_freq", 3}, {"every_n_epochs", 2}}).find("exclusive"),
            std::string::npos);
  // Keras 2's period is every_n_epochs, once.
  EXPECT_NE(message({{"period", 2}, {"every_n_epochs", 3}}).find("options.period"),
            std::string::npos);
  EXPECT_NE(message({{"save_freq", 3}, {"train_time_interval", 1.5}}).find("exclusive"),
            std::string::npos);
  EXPECT_NE(message({{"train_time_interval", 0}}).find("options.train_time_interval"),
            std::string::npos);
  // Found before training, not at the first save: a spec the epoch cannot take, a folder.
  EXPECT_NE(message({{"filepath", "a/{epoch:.2}.h5"}}).find("options.filepath"), std::string::npos);
  for (const char* folder : {"ck/", ".", "ck/..", "/"})
    EXPECT_NE(message({{"filepath", folder}}).find("names a folder"), std::string::npos) << folder;
  EXPECT_EQ(message({{"filepath", "ck/{epoch:02d}-{val_loss:.2f}-{lr:.0e}.h5"}}), "no error");
  // Beyond what std::int64_t holds (9223372036854775808 was taken, and saved every epoch).
  EXPECT_NE(message({{"save_freq", json::parse("9223372036854775808")}}).find("options.save_freq"),
            std::string::npos);
}

TEST(CheckpointPlugin, FilepathTemplatesFormatEpochStepAndLogValues) {
  PluginRun run;
  run.add("checkpoint", {{"filepath",
                          "ck/e{epoch:02d}-s{step:04d}-{loss:.4f}-{val_accuracy:.1%}"
                          "{{x}}.h5"}});
  auto history = run.fit(std::make_shared<TableDataset>(64), std::make_shared<TableDataset>(24), 3);
  ASSERT_EQ(history.size(), 3u);
  std::set<std::string> expected;
  for (int e = 0; e < 3; ++e) {
    char name[128];
    std::snprintf(name, sizeof name, "e%02d-s%04d-%.4f-%.1f%%{x}.h5", e + 1, 8 * (e + 1),
                  *history[e].get("loss"), *history[e].get("val_accuracy") * 100);
    expected.insert(name);
  }
  // Relative file paths resolve against the run folder.
  EXPECT_EQ(h5_files(run.run_dir / "ck"), expected);
  EXPECT_EQ(index_files(run.run_dir / "ck"), expected);

  // The learning rate in force, which the logs do not carry (it failed the run after an epoch).
  PluginRun rated("cpu:1", 0.25);
  rated.add("checkpoint", {{"filepath", "ck/{epoch}-{lr}-{learning_rate:.3f}.h5"}});
  rated.fit(std::make_shared<TableDataset>(64), nullptr, 1);
  EXPECT_EQ(h5_files(rated.run_dir / "ck"), std::set<std::string>{"1-0.25-0.250.h5"});

  // Python format specs: padding, hexadecimal, exponent, general, repr, alignment.
  Driver d(json{{"filepath",
                 "f/{epoch:03d}_{step:#x}_{loss:.2e}_{acc:g}_{acc}_{lr}_{epoch:*^5}_"
                 "{loss:+.1f}.h5"}});
  d.epoch_end(6, make_logs({{"loss", 0.000123}, {"acc", 0.5}, {"lr", 2.0}}));
  d.train_end();
  EXPECT_EQ(h5_files(d.run.run_dir / "f"),
            std::set<std::string>{"007_0x0_1.23e-04_0.5_0.5_2.0_**7**_+0.0.h5"});
}

// A precision without a type is Python's general format, not printf's %g (values checked with
// /usr/bin/python3's format()): 1.0 at .3 is "1.0" and at .0 "1e+00", 12.0 at .2 "1.2e+01",
// 100.0 at .6 "100.0" and at .3 "1e+02".
TEST(CheckpointPlugin, APrecisionWithoutATypeFormatsAsPythonsGeneralFormat) {
  Driver d(json{{"filepath", "g/{lr:.3}_{lr:.0}_{acc:.2}_{big:.6}_{big:.3}_{small:.2}.h5"}});
  d.epoch_end(0, make_logs({{"acc", 12.0}, {"big", 100.0}, {"small", 0.000123}, {"lr", 1.0}}));
  d.train_end();
  EXPECT_EQ(h5_files(d.run.run_dir / "g"),
            std::set<std::string>{"1.0_1e+00_1.2e+01_100.0_1e+02_0.00012.h5"});
  const CommandResult python = run_python(
      d.run.run_dir / "fmt.py",
      "print('{lr:.3}_{lr:.0}_{acc:.2}_{big:.6}_{big:.3}_{small:.2}'.format(lr=1.0, acc=12.0, "
      "big=100.0, small=0.000123))",
      "");
  EXPECT_EQ(python.out, "1.0_1e+00_1.2e+01_100.0_1e+02_0.00012\n") << python.err;
}

// A checkpoint named as one of the run's own files would replace it (the event stream became an
// HDF5 file, exit 0): refused at its option, before training for a fixed name, at the save for a
// template that formats to one.
TEST(CheckpointPlugin, TheRunsOwnFilesAreRefusedAsCheckpointNames) {
  PluginRun run;
  for (const char* own : {"events.jsonl", "config.json", "model.h5", ".tandem.lock"}) {
    try {
      run.host.load("checkpoint")
          .create({{"filepath", own}}, {Target::template_model, "callbacks[1]"});
      ADD_FAILURE() << own << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), "callbacks[1].options.filepath") << own;
      EXPECT_NE(std::string(e.what()).find("choose another file name"), std::string::npos);
    }
  }
  PluginRun templated;
  templated.add("checkpoint", {{"filepath", "{epoch}/../model.h5"}});
  EXPECT_THROW(templated.fit(std::make_shared<TableDataset>(32), nullptr, 1), std::exception);
  EXPECT_FALSE(std::filesystem::exists(templated.run_dir / "model.h5"));
}

TEST(CheckpointPlugin, AMissingKeyIsAClearErrorNamingTheKey) {
  PluginRun run;
  run.add("checkpoint", {{"filepath", "ck/{epoch}-{val_loss:.3f}.h5"}});
  try {
    run.fit(std::make_shared<TableDataset>(32), nullptr, 2);  // no validation: no val_loss
    FAIL() << "expected a RunError";
  } catch (const RunError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("callback 'checkpoint'"), std::string::npos) << what;
    EXPECT_NE(what.find("{val_loss}"), std::string::npos) << what;
    EXPECT_NE(what.find("available: accuracy, epoch, learning_rate, loss, lr, step"),
              std::string::npos)
        << what;
  }
  EXPECT_TRUE(h5_files(run.run_dir / "ck").empty());
}

TEST(CheckpointPlugin, SaveBestOnlySavesExactlyWhenTheMonitoredValueImproves) {
  const json best = {{"save_best_only", true}};
  // auto on val_loss = min.
  EXPECT_EQ(saved_epochs(best, "val_loss", {0.5, 0.7, 0.4, 0.4, 0.6, 0.3}),
            (std::vector<int>{1, 3, 6}));
  // auto on *acc* = max; equal is not an improvement.
  EXPECT_EQ(saved_epochs(best, "val_accuracy", {0.5, 0.4, 0.6, 0.6, 0.9}),
            (std::vector<int>{1, 3, 5}));
  // auc, precision, recall = max too, as Keras 3's directions (tf.keras 2's "acc" rule minimised
  // a val_auc: a better model was never saved).
  EXPECT_EQ(saved_epochs(best, "val_auc", {0.5, 0.6, 0.4}), (std::vector<int>{1, 2}));
  // Explicit modes override the name.
  json max = best;
  max["mode"] = "max";
  EXPECT_EQ(saved_epochs(max, "val_loss", {0.5, 0.7, 0.4, 0.8}), (std::vector<int>{1, 2, 4}));
  json min = best;
  min["mode"] = "min";
  min["monitor"] = "val_accuracy";
  EXPECT_EQ(saved_epochs(min, "val_accuracy", {0.5, 0.7, 0.4}), (std::vector<int>{1, 3}));
  // initial_value_threshold seeds the best value.
  json threshold = best;
  threshold["initial_value_threshold"] = 0.45;
  EXPECT_EQ(saved_epochs(threshold, "val_loss", {0.5, 0.44, 0.46, 0.3}), (std::vector<int>{2, 4}));
  // NaN never improves.
  EXPECT_EQ(saved_epochs(best, "val_loss", {std::nan(""), 0.5, std::nan(""), 0.4}),
            (std::vector<int>{2, 4}));
}

// Keras 3 saves when the monitor is missing (a misspelt monitor lost every checkpoint under
// tf.keras 2.15's rule, which Tandem followed before), warning; Tandem warns once.
TEST(CheckpointPlugin, SaveBestOnlyWithoutTheMonitoredKeyWarnsOnceAndSavesAsKeras3) {
  testing::internal::CaptureStderr();
  {
    Driver d(json{{"filepath", "w/{epoch}.h5"}, {"save_best_only", true}});
    for (int e = 0; e < 3; ++e) d.epoch_end(e, make_logs({{"loss", 0.5}, {"accuracy", 0.1}}));
    d.train_end();
    EXPECT_EQ(h5_files(d.run.run_dir / "w"), (std::set<std::string>{"1.h5", "2.h5", "3.h5"}));
  }
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string warning =
      "can save best model only with val_loss available; saving every time, as Keras 3 does";
  const auto first = err.find(warning);
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(warning, first + 1), std::string::npos) << "warned more than once:\n" << err;
  EXPECT_NE(err.find("the logs have: loss, accuracy"), std::string::npos) << err;
}

TEST(CheckpointPlugin, SaveFreqSavesTheTemplateAtBatchLevelOnAMetaModel) {
  for (Target target : {Target::template_model, Target::meta}) {
    PluginRun run("cpu:3");
    run.add("checkpoint", {{"filepath", "b/{epoch}-{batch}.h5"}, {"save_freq", 3}}, target);
    run.fit(std::make_shared<TableDataset>(64), nullptr, 2);  // 8 batches per epoch
    // Batches are counted across epochs, as Keras does: global batches 3, 6, 9, 12, 15.
    EXPECT_EQ(h5_files(run.run_dir / "b"),
              (std::set<std::string>{"1-3.h5", "1-6.h5", "2-1.h5", "2-4.h5", "2-7.h5"}));
    const CheckpointData data = read_checkpoint_file(run.run_dir / "b" / "2-7.h5");
    // The template's Keras layout: its layers, no wrapper around them.
    ASSERT_EQ(data.layers.size(), run.model->layer_count());
    for (std::size_t i = 0; i < data.layers.size(); ++i)
      EXPECT_EQ(data.layers[i].layer, run.model->layer(i).name());
    EXPECT_EQ(data.model_config, run.model->config());
    EXPECT_EQ(data.layers[0].weights[0].name, "kernel");
    EXPECT_EQ(data.layers[0].weights[0].value.shape(), (Shape{4, 16}));
    ASSERT_TRUE(data.training.has_value());
    EXPECT_EQ(data.training->state["target"], target_name(target));
    EXPECT_EQ(data.training->state["device_plan"]["plan"], "cpu:3");
    EXPECT_EQ(data.training->state["step"], 15);
    // Global batch 15 is the one before the last: the next step changed the weights.
    const CheckpointData last_step = read_checkpoint_file(run.run_dir / "b" / "1-6.h5");
    EXPECT_EQ(last_step.training->state["step"], 6);
    EXPECT_FALSE(same_weights(data, *run.model));
  }
}

TEST(CheckpointPlugin, SaveWeightsOnlyFilesHaveNoTandemGroup) {
  PluginRun run;
  run.add("checkpoint", {{"filepath", "w/{epoch}.h5"}, {"save_weights_only", true}});
  run.fit(std::make_shared<TableDataset>(32), nullptr, 2);
  ASSERT_EQ(h5_files(run.run_dir / "w"), (std::set<std::string>{"1.h5", "2.h5"}));
  const fs::path file = run.run_dir / "w" / "2.h5";
  {
    std::lock_guard lock(hdf5_mutex());
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    EXPECT_EQ(H5Lexists(f, "tandem", H5P_DEFAULT), 0);
    EXPECT_GT(H5Lexists(f, "model_weights", H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  const CheckpointData data = read_checkpoint_file(file);
  EXPECT_FALSE(data.training.has_value());
  EXPECT_TRUE(same_weights(data, *run.model));
  for (const auto& e : index_of(run.run_dir / "w")) EXPECT_FALSE(e["resumable"].get<bool>());
  // Not resumable: restoring says so.
  PluginRun other;
  try {
    other.trainer->restore(data, file.string());
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("weights only"), std::string::npos) << e.what();
  }
}

TEST(CheckpointPlugin, SaveTopKKeepsExactlyTheKBestAndTheIndexMatchesTheFiles) {
  const std::vector<double> values = {0.9, 0.5, 0.7, 0.3, 0.8, 0.4, 0.35};
  auto run_top_k = [&](int k, bool save_last, const std::string& monitor,
                       std::vector<std::set<std::string>>* after_each = nullptr) {
    Driver d(json{{"filepath", "k/{epoch}.h5"},
                  {"save_top_k", k},
                  {"save_last", save_last},
                  {"monitor", monitor}});
    for (std::size_t i = 0; i < values.size(); ++i) {
      d.epoch_end(static_cast<int>(i), make_logs({{"loss", 1.0}, {"val_loss", values[i]}}));
      d.train_end();  // drains the writer: the folder and the index are settled
      const auto files = h5_files(d.run.run_dir / "k");
      EXPECT_EQ(index_files(d.run.run_dir / "k"), files) << "after epoch " << i + 1;
      if (after_each) after_each->push_back(files);
    }
    return std::make_pair(h5_files(d.run.run_dir / "k"), index_of(d.run.run_dir / "k"));
  };
  std::vector<std::set<std::string>> steps;
  auto [files, index] = run_top_k(2, false, "val_loss", &steps);
  EXPECT_EQ(files, (std::set<std::string>{"4.h5", "7.h5"}));  // 0.3 and 0.35
  EXPECT_EQ(steps[1], (std::set<std::string>{"1.h5", "2.h5"}));
  EXPECT_EQ(steps[2], (std::set<std::string>{"2.h5", "3.h5"}));  // 0.7 replaces 0.9
  EXPECT_EQ(steps[4], (std::set<std::string>{"2.h5", "4.h5"}));  // 0.8 is not in the top 2
  for (const auto& e : index) {
    const int epoch = e["epoch"].get<int>();
    EXPECT_EQ(e["value"].get<double>(), values[static_cast<std::size_t>(epoch - 1)]);
    EXPECT_EQ(e["monitor"], "val_loss");
    EXPECT_EQ(e["file"], std::to_string(epoch) + ".h5");
    EXPECT_EQ(fs::path(e["path"].get<std::string>()).filename(), e["file"].get<std::string>());
  }
  // k = -1 keeps all; k = 0 keeps none; with save_last only last.h5.
  EXPECT_EQ(run_top_k(-1, false, "val_loss").first.size(), values.size());
  EXPECT_TRUE(run_top_k(0, false, "val_loss").first.empty());
  auto [last_only, last_index] = run_top_k(0, true, "val_loss");
  EXPECT_EQ(last_only, std::set<std::string>{"last.h5"});
  ASSERT_EQ(last_index.size(), 1u);
  EXPECT_EQ(last_index[0]["epoch"], 7);
  EXPECT_TRUE(last_index[0]["last"].get<bool>());
  // initial_value_threshold gates top-k too.
  {
    Driver d(
        json{{"filepath", "k/{epoch}.h5"}, {"save_top_k", 2}, {"initial_value_threshold", 0.6}});
    for (std::size_t i = 0; i < values.size(); ++i)
      d.epoch_end(static_cast<int>(i), make_logs({{"val_loss", values[i]}}));
    d.train_end();
    EXPECT_EQ(h5_files(d.run.run_dir / "k"), (std::set<std::string>{"4.h5", "7.h5"}));
  }
  // With the monitored key missing, top-k cannot rank: nothing is saved.
  testing::internal::CaptureStderr();
  EXPECT_TRUE(run_top_k(2, false, "val_auc").first.empty());
  EXPECT_NE(testing::internal::GetCapturedStderr().find("save_top_k ranks checkpoints by val_auc"),
            std::string::npos);
}

TEST(CheckpointPlugin, SaveTopKWithRepeatedFileNamesReplacesTheOldFile) {
  Driver d(json{{"filepath", "k/{val_loss:.1f}.h5"}, {"save_top_k", 2}});
  const std::vector<double> values = {0.52, 0.31, 0.33, 0.12};
  for (std::size_t i = 0; i < values.size(); ++i)
    d.epoch_end(static_cast<int>(i), make_logs({{"val_loss", values[i]}}));
  d.train_end();
  const fs::path dir = d.run.run_dir / "k";
  EXPECT_EQ(h5_files(dir), (std::set<std::string>{"0.1.h5", "0.3.h5"}));
  const json index = index_of(dir);
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0]["file"], "0.3.h5");
  EXPECT_EQ(index[0]["value"], 0.33);  // written again at epoch 3
  EXPECT_EQ(index[0]["epoch"], 3);
  EXPECT_EQ(index[1]["file"], "0.1.h5");
}

TEST(CheckpointPlugin, SaveTopKWithSaveBestOnlyKeepsTheLastKImprovements) {
  Driver d(json{{"filepath", "k/{epoch}.h5"}, {"save_top_k", 2}, {"save_best_only", true}});
  const std::vector<double> values = {0.9, 0.95, 0.5, 0.6, 0.4, 0.45, 0.2};
  for (std::size_t i = 0; i < values.size(); ++i)
    d.epoch_end(static_cast<int>(i), make_logs({{"val_loss", values[i]}}));
  d.train_end();
  EXPECT_EQ(h5_files(d.run.run_dir / "k"), (std::set<std::string>{"5.h5", "7.h5"}));
  EXPECT_EQ(index_files(d.run.run_dir / "k"), h5_files(d.run.run_dir / "k"));
}

TEST(CheckpointPlugin, SaveLastKeepsTheNewestCheckpointNextToTheOthers) {
  PluginRun run;
  run.add("checkpoint", {{"filepath", "c/{step}.h5"},
                         {"save_freq", 4},
                         {"save_last", true},
                         {"save_top_k", 1},
                         {"monitor", "loss"}});
  run.fit(std::make_shared<TableDataset>(64), nullptr, 2);  // 16 steps
  const fs::path dir = run.run_dir / "c";
  EXPECT_TRUE(h5_files(dir).count("last.h5"));
  EXPECT_EQ(h5_files(dir).size(), 2u);  // the best and last.h5
  const CheckpointData last = read_checkpoint_file(dir / "last.h5");
  EXPECT_EQ(last.training->state["step"], 16);
  EXPECT_TRUE(same_weights(last, *run.model));
  EXPECT_EQ(index_files(dir), h5_files(dir));
  for (const auto& e : index_of(dir))
    if (e["file"] == "last.h5") {
      EXPECT_EQ(e["step"], 16);
    }
}

TEST(CheckpointPlugin, EveryNEpochsSavesEveryNthEpoch) {
  for (const char* key : {"every_n_epochs", "period"}) {  // period: Keras 2's name for it
    Driver d(json{{"filepath", "n/{epoch}.h5"}, {key, 2}});
    for (int e = 0; e < 5; ++e) d.epoch_end(e, make_logs({{"loss", 1.0}}));
    d.train_end();
    EXPECT_EQ(h5_files(d.run.run_dir / "n"), (std::set<std::string>{"2.h5", "4.h5"})) << key;
  }
}

// A dataset whose reads take `ms` milliseconds per batch.
class SlowDataset : public TableDataset {
 public:
  SlowDataset(std::int64_t n, int ms) : TableDataset(n), ms_(ms) {}
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    TableDataset::read(indices, x, y);
  }

 private:
  int ms_;
};

// Records when each batch ended. It runs just before the checkpoint callback, so its clock
// readings are the callback's, give or take microseconds (the save work comes after both).
struct Clocked : Callback {
  std::string name() const override { return "clocked"; }
  void on_train_begin(CallbackContext&, const Logs&) override { begin = Clock::now(); }
  void on_train_batch_end(CallbackContext& ctx, std::int64_t, const Logs&) override {
    at[ctx.state().step] = Clock::now();
  }
  Clock::time_point begin;
  std::map<std::int64_t, Clock::time_point> at;
};

TEST(CheckpointPlugin, TrainTimeIntervalSavesAtTheFirstBatchAfterEachInterval) {
  const double interval = 0.1;
  PluginRun run;
  auto clock = std::make_shared<Clocked>();
  run.bus.add(clock);
  run.add("checkpoint", {{"filepath", "t/{step}.h5"}, {"train_time_interval", interval}});
  run.fit(std::make_shared<SlowDataset>(240, 8), nullptr, 1);  // 30 batches, >= 8 ms each
  std::vector<std::int64_t> steps;
  for (const auto& e : index_of(run.run_dir / "t")) steps.push_back(e["step"].get<std::int64_t>());
  auto secs = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  ASSERT_EQ(clock->at.size(), 30u);
  const double total = secs(clock->begin, clock->at[30]);  // >= 30 * 8 ms
  ASSERT_GE(steps.size(), 2u);
  EXPECT_LE(static_cast<double>(steps.size()), total / interval);
  const double slack = 0.01;  // scheduling noise between the two callbacks' clock readings
  Clock::time_point previous = clock->begin;
  for (std::int64_t s : steps) {
    EXPECT_GE(secs(previous, clock->at[s]), interval - slack) << "step " << s;
    if (s > 1) {
      EXPECT_LT(secs(previous, clock->at[s - 1]), interval + slack) << "step " << s;
    }
    previous = clock->at[s];
  }
}

TEST(CheckpointPlugin, AsyncWritesManyQuickSavesAllLandAndTheLastEqualsTheFinalWeights) {
  for (bool async : {true, false}) {
    const std::int64_t steps = async ? 120 : 40;  // 2 epochs of batch 4
    PluginRun run;
    run.add("checkpoint", {{"filepath", "a/{step:04d}.h5"}, {"save_freq", 1}, {"async", async}});
    const auto t0 = Clock::now();
    run.fit(std::make_shared<TableDataset>(steps * 2), nullptr, 2, 4);  // a save every step
    const double fit_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const fs::path dir = run.run_dir / "a";
    const auto files = h5_files(dir);
    ASSERT_EQ(files.size(), static_cast<std::size_t>(steps));
    EXPECT_EQ(index_files(dir), files);
    char last[16];
    std::snprintf(last, sizeof last, "%04d.h5", static_cast<int>(steps));
    EXPECT_TRUE(same_weights(read_checkpoint_file(dir / last), *run.model));
    for (const auto& f : files) EXPECT_NO_THROW(read_checkpoint_file(dir / f)) << f;

    // checkpoint_saved events: one per file, well-formed (docs/design.md contract 6).
    const auto events = saved_events(run.run_dir);
    ASSERT_EQ(events.size(), static_cast<std::size_t>(steps));
    double write = 0, wait = 0, capture = 0;
    std::int64_t previous_step = 0;
    for (const auto& e : events) {
      EXPECT_EQ(e["schema"], 1);
      EXPECT_TRUE(e["time"].is_string());
      ASSERT_TRUE(e["path"].is_string());
      const fs::path p = e["path"].get<std::string>();
      EXPECT_TRUE(p.is_absolute());
      EXPECT_EQ(e["bytes"].get<std::uintmax_t>(), fs::file_size(p));
      EXPECT_GE(e["epoch"].get<int>(), 1);
      EXPECT_LE(e["epoch"].get<int>(), 2);
      EXPECT_EQ(e["step"].get<std::int64_t>(), previous_step + 1);  // in order
      previous_step = e["step"].get<std::int64_t>();
      EXPECT_EQ(e["monitor"], "val_loss");
      EXPECT_TRUE(e["value"].is_null());  // batch logs have no val_loss
      EXPECT_FALSE(e["best"].get<bool>());
      EXPECT_EQ(e["target"], "template");
      EXPECT_GE(e["seconds"].get<double>(), 0.0);
      write += e["seconds"].get<double>();
      wait += e["wait_seconds"].get<double>();
      capture += e["capture_seconds"].get<double>();
    }
    std::cout << "[ measured ] " << (async ? "async" : "sync ") << ": " << steps << " saves of "
              << fs::file_size(dir / last) << " bytes; fit " << fit_seconds << " s; writing "
              << write << " s; training thread waited " << wait << " s; capture " << capture
              << " s\n";
  }
}

TEST(CheckpointPlugin, ATemplateCheckpointOfCpu3LoadsIntoCpu1AndPredictsIdentically) {
  PluginRun three("cpu:3");
  three.add("checkpoint", {{"filepath", "t/{epoch}.h5"}});
  three.fit(std::make_shared<TableDataset>(60), nullptr, 2);
  const fs::path file = three.run_dir / "t" / "2.h5";
  const CheckpointData data = read_checkpoint_file(file);
  EXPECT_EQ(data.training->state["device_plan"]["plan"], "cpu:3");
  EXPECT_TRUE(same_weights(data, *three.model));

  PluginRun one("cpu:1", 0.01, /*seed=*/77);  // other initial weights
  EXPECT_FALSE(same_weights(data, *one.model));
  one.trainer->select_target(Target::template_model);
  one.trainer->target().load_weights(data, file.string());
  EXPECT_TRUE(same_weights(data, *one.model));

  TableDataset table(37);
  std::vector<std::int64_t> rows(37);
  std::iota(rows.begin(), rows.end(), 0);
  Tensor x({37, 4});
  std::vector<float> y(37);
  table.read(rows, x.data(), y.data());
  std::vector<float> p3(37 * 3), p1(37 * 3);
  three.meta->predict(x, p3.data());
  one.meta->predict(x, p1.data());
  // cpu:3 predicts rows 0-12, 13-24 and 25-36 on its replicas: cpu:1 predicting the same blocks
  // gives the same bits; the whole batch at once runs GEMMs of another shape, which oneDNN may
  // sum in another order (its AVX2 kernels do), so that is equal to float rounding.
  const std::int64_t bounds[] = {0, 13, 25, 37};
  for (int r = 0; r < 3; ++r) {
    const std::int64_t n = bounds[r + 1] - bounds[r];
    std::vector<float> block(static_cast<std::size_t>(n * 3));
    one.meta->predict(Tensor::view(x, bounds[r] * 4, {n, 4}).clone(), block.data());
    EXPECT_TRUE(std::equal(block.begin(), block.end(), p3.begin() + bounds[r] * 3))
        << "rows " << bounds[r] << " to " << bounds[r + 1] - 1;
  }
  for (std::size_t i = 0; i < p1.size(); ++i)
    EXPECT_NEAR(p3[i], p1[i], 1e-5 * std::max(1.0f, std::fabs(p1[i]))) << "element " << i;
}

TEST(CheckpointPlugin, AMetaCheckpointRestoresOnTheSamePlanAndIsRefusedOnAnother) {
  PluginRun two("cpu:2");
  two.add("checkpoint", {{"filepath", "m/{epoch}.h5"}}, Target::meta);
  auto data_set = std::make_shared<TableDataset>(48);
  two.fit(data_set, nullptr, 2);
  const fs::path file = two.run_dir / "m" / "2.h5";
  const CheckpointData data = read_checkpoint_file(file);
  EXPECT_EQ(data.training->state["target"], "meta");
  EXPECT_EQ(data.training->state["device_plan"]["plan"], "cpu:2");
  ASSERT_EQ(data.training->state["device_plan"]["replicas"].size(), 2u);

  // Same plan: restores, and training on continues exactly as the original run does.
  PluginRun again("cpu:2", 0.01, 77);
  again.trainer->restore(data, file.string());
  EXPECT_TRUE(same_weights(data, *again.model));
  two.fit(data_set, nullptr, 3);
  again.fit(data_set, nullptr, 3);
  EXPECT_TRUE(same_weights(again.trainer->checkpoint(), *two.model));
  EXPECT_EQ(again.trainer->state().history.size(), 3u);

  PluginRun three("cpu:3");
  try {
    three.trainer->restore(data, file.string());
    FAIL() << "a cpu:2 meta checkpoint restored on cpu:3";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'cpu:2'"), std::string::npos) << what;
    EXPECT_NE(what.find("'cpu:3'"), std::string::npos) << what;
    EXPECT_NE(what.find("template"), std::string::npos) << what;
  }
}

// Every object path in an HDF5 file, sorted: the file's structure.
std::vector<std::string> structure(const fs::path& file) {
  std::lock_guard lock(hdf5_mutex());
  std::vector<std::string> names;
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return names;
  H5Ovisit(
      f, H5_INDEX_NAME, H5_ITER_NATIVE,
      [](hid_t, const char* name, const H5O_info_t*, void* out) -> herr_t {
        static_cast<std::vector<std::string>*>(out)->push_back(name);
        return 0;
      },
      &names);
  H5Fclose(f);
  return names;
}

TEST(CheckpointPlugin, TenSaveLoadRoundTripsOfAMetaCheckpointKeepSizeAndStructure) {
  auto data_set = std::make_shared<TableDataset>(32);
  fs::path previous;
  std::uintmax_t first_size = 0;
  std::vector<std::string> first_structure;
  for (int round = 0; round < 10; ++round) {
    PluginRun run("cpu:2");
    auto cb = run.add("checkpoint", {{"filepath", "r.h5"}}, Target::meta);
    if (round == 0) {
      run.fit(data_set, nullptr, 1);
    } else {
      const auto t0 = Clock::now();
      run.trainer->restore(read_checkpoint_file(previous), previous.string());
      const double load = std::chrono::duration<double>(Clock::now() - t0).count();
      EXPECT_LT(load, 1.0);
      run.trainer->select_target(Target::meta);
      cb->on_train_begin(*run.trainer, Logs{});
      cb->on_epoch_end(*run.trainer, 0, run.trainer->state().history.back());
      cb->on_train_end(*run.trainer, Logs{});
    }
    const fs::path file = run.run_dir / "r.h5";
    ASSERT_TRUE(fs::exists(file)) << "round " << round;
    if (round == 0) {
      first_size = fs::file_size(file);
      first_structure = structure(file);
      ASSERT_FALSE(first_structure.empty());
    } else {
      EXPECT_EQ(fs::file_size(file), first_size) << "round " << round;
      EXPECT_EQ(structure(file), first_structure) << "round " << round;
    }
    const CheckpointData data = read_checkpoint_file(file);
    EXPECT_EQ(data.layers.size(), 2u);
    EXPECT_EQ(data.training->state["epoch"], 1);
    EXPECT_EQ(data.training->state["history"].size(), 1u);
    previous = file;
  }
}

TEST(CheckpointPlugin, AnEpochEndCheckpointResumesAtTheNextEpochExactly) {
  auto train = std::make_shared<TableDataset>(48);
  auto validation = std::make_shared<TableDataset>(16);
  PluginRun full;
  full.add("checkpoint", {{"filepath", "e/{epoch}.h5"}});
  full.fit(train, validation, 4);
  PluginRun resumed(std::string("cpu:1"), 0.01, 77);
  resumed.trainer->restore(read_checkpoint_file(full.run_dir / "e" / "2.h5"), "2.h5");
  EXPECT_EQ(resumed.trainer->state().epoch, 2);
  EXPECT_EQ(resumed.trainer->state().batch, 0);
  const auto& history = resumed.fit(train, validation, 4);
  ASSERT_EQ(history.size(), 4u);  // not 5: epoch 2's end is not redone
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(history[i].to_json(), full.trainer->state().history[i].to_json()) << i;
  EXPECT_TRUE(same_weights(resumed.trainer->checkpoint(), *full.model));
}

TEST(CheckpointPlugin, AFashionMlpCheckpointOpensInH5py) {
  json config = json::parse(read_text(source_dir() / "resources/configs/fashion-mlp.json"));
  auto model = Model::from_config(config["model"], "model", 42);
  auto loss = make_loss(config["loss"], "loss");
  auto optimizer = make_optimizer(config["optimizer"], "optimizer");
  ReplicaModel meta(*model, *optimizer, DevicePlan::cpus(1));
  const auto metrics = make_metrics(config["metrics"], "metrics", *loss, {10});
  Trainer trainer(meta, Objective::borrowing(*loss, metrics));
  const fs::path dir = scratch_dir("checkpoint-h5py");
  trainer.set_run_dir(dir);
  PluginHost host;
  auto cb =
      host.load("checkpoint")
          .create({{"filepath", "fashion-{epoch}.h5"}}, {Target::template_model, "callbacks[0]"});
  trainer.select_target(Target::template_model);
  cb->on_train_begin(trainer, Logs{});
  cb->on_epoch_end(trainer, 0, make_logs({{"loss", 0.5}}));
  cb->on_train_end(trainer, Logs{});
  const fs::path file = dir / "fashion-1.h5";
  ASSERT_TRUE(fs::exists(file));
  const fs::path script = dir / "check.py";
  write_text(script, R"(import h5py, json, sys
with h5py.File(sys.argv[1], "r") as f:
    layers = [n.decode() for n in f["model_weights"].attrs["layer_names"]]
    assert layers == ["flatten", "dense", "dense_1", "logits"], layers
    names = [n.decode() for n in f["model_weights/dense"].attrs["weight_names"]]
    assert names == ["dense/kernel:0", "dense/bias:0"], names
    kernel = f["model_weights/dense/dense/kernel:0"]
    assert kernel.shape == (784, 256), kernel.shape
    assert str(kernel.dtype) == "float32", kernel.dtype
    config = json.loads(f.attrs["model_config"])
    assert config["class_name"] == "Sequential"
    state = json.loads(bytes(f["tandem/state"][()]).decode())
    print("ok", float(kernel[0, 0]), state["target"])
)");
  const auto r =
      run_command(std::string(system_python()) + " " + script.string() + " " + file.string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.substr(0, 3), "ok ");
  EXPECT_NEAR(std::stod(r.out.substr(3)), model->layer(1).parameters()[0]->value[0], 1e-7);
  EXPECT_NE(r.out.find("template"), std::string::npos);
}

}  // namespace
}  // namespace tandem::test
