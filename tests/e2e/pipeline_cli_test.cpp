// Pipelines through the `tandem` binary (issue "Model parallelism", docs/pipeline.md): a model in
// two stages on cpu:2 with 4 micro-batches trains 10 steps to the weights of cpu:1 (h5py reads
// both checkpoints), its checkpoint evaluates on a plain `--devices cpu`, it resumes to the bits
// of an uninterrupted run, the run records the pipeline and the placement, `tandem summary`
// prints it, and wrong pipeline settings exit 2 naming their place.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

json mlp_config() {
  return json::parse(R"({"name": "piped", "seed": 5, "epochs": 1, "batch_size": 32,
      "steps_per_epoch": 10,
      "model": {"class_name": "Sequential", "config": {"name": "mlp", "layers": [
          {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 20], "name": "x"}},
          {"class_name": "Dense", "config": {"name": "hidden", "units": 32, "activation": "relu"}},
          {"class_name": "Dropout", "config": {"name": "drop", "rate": 0.2}},
          {"class_name": "Dense", "config": {"name": "middle", "units": 16, "activation": "tanh"}},
          {"class_name": "Dense", "config": {"name": "out", "units": 4, "activation": "softmax"}}]}},
      "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.01}},
      "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"],
      "data": {"train": {"type": "synthetic", "task": "classes", "classes": 4, "samples": 640,
                         "x_shape": [20], "seed": 2}}})");
}

constexpr const char* kPipeline =
    "--devices cpu:2 --set pipeline.stages=2 --set pipeline.microbatches=4";

// Largest relative difference over the weights of two checkpoints, and whether they are equal
// to the bit, as h5py reads them.
json compare_checkpoints(const fs::path& a, const fs::path& b) {
  auto r = run_command(std::string(test::system_python()) +
                       " -c '\n"
                       "import h5py, json, sys, numpy as np\n"
                       "a, b = (h5py.File(p, \"r\")[\"model_weights\"] for p in sys.argv[1:3])\n"
                       "worst, same, names = 0.0, True, []\n"
                       "a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) "
                       "else None)\n"
                       "for n in names:\n"
                       "  x, y = a[n][()], b[n][()]\n"
                       "  worst = max(worst, float(np.abs(x - y).max() / np.abs(y).max()))\n"
                       "  same = same and x.tobytes() == y.tobytes()\n"
                       "print(json.dumps({\"worst\": worst, \"same\": same, \"weights\": len(names)}))"
                       "\n' " +
                       a.string() + " " + b.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(PipelineCli, TwoStagesTrainAsOneDeviceAndTheCheckpointLoadsAnywhere) {
  const fs::path dir = test::scratch_dir("pipeline-cli");
  const std::string cli = test::tandem_cli();
  auto single = test::train_in(dir, "single", mlp_config());
  ASSERT_EQ(single.exit_code, 0) << single.err;
  json with_stats = mlp_config();
  with_stats["callbacks"] = {
      {{"plugin", "replica_stats"}, {"target", "meta"}, {"options", {{"every_n_batches", 5}}}}};
  auto piped = test::train_in(dir, "piped", with_stats, kPipeline);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  const json diff = compare_checkpoints(dir / "piped/model.h5", dir / "single/model.h5");
  EXPECT_EQ(diff["weights"], 6);
  EXPECT_LE(diff["worst"].get<double>(), 1e-5) << diff.dump();

  // The run records its pipeline and what each worker held.
  const json resolved = json::parse(test::read_text(dir / "piped/config.json"));
  EXPECT_EQ(resolved["pipeline"],
            (json{{"stages", 2}, {"microbatches", 4}, {"schedule", "1f1b"},
                  {"balance", "parameters"}}));
  const std::string events = test::read_text(dir / "piped/events.jsonl");
  const json started = json::parse(events.substr(0, events.find('\n')));
  ASSERT_EQ(started["event"], "run_started") << started.dump();
  const json& placement = started["placement"];
  ASSERT_EQ(placement.size(), 2u) << placement.dump();
  EXPECT_EQ(placement[0]["layers"], (json{"hidden"}));  // 672 parameters against 528 + 68
  EXPECT_EQ(placement[1]["layers"], (json{"drop", "middle", "out"}));
  EXPECT_EQ(placement[1]["stage"], 1);
  // The plan's devices say the same: one replica of two stages.
  const json& devices = started["devices"]["replicas"];
  ASSERT_EQ(devices.size(), 2u) << devices.dump();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(devices[i]["replica"], 0) << devices.dump();
    EXPECT_EQ(devices[i]["stage"], i) << devices.dump();
  }
  EXPECT_EQ(placement[0]["memory"]["weights"], 672 * 4);
  // The meta view shows the stages: replica_stats publishes each worker's layers and time.
  const std::size_t at = events.find("\"event\":\"replica_stats\"");
  ASSERT_NE(at, std::string::npos) << events;
  const std::size_t line = events.rfind('\n', at) + 1;
  const json stats = json::parse(events.substr(line, events.find('\n', at) - line));
  const json& stages = stats["replicas"][0]["stages"];
  ASSERT_EQ(stages.size(), 2u) << stats.dump();
  EXPECT_EQ(stages[1]["layers"], (json{"drop", "middle", "out"}));
  EXPECT_EQ(stages[1]["index"], 1);
  EXPECT_GT(stages[0]["step_seconds"].get<double>(), 0.0);
  const double bubble = stats["replicas"][0]["bubble"].get<double>();
  EXPECT_TRUE(bubble >= 0.0 && bubble < 1.0) << bubble;

  // The pipelined checkpoint evaluates on one plain CPU replica, as cpu:1's own does.
  const auto evaluate = [&](const char* run) {
    auto r = run_command(cli + " evaluate " + (dir / "single.json").string() + " --weights " +
                         (dir / run / "model.h5").string() + " --devices cpu --split train -q");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["loss"].get<double>();
  };
  const double piped_loss = evaluate("piped"), single_loss = evaluate("single");
  EXPECT_NEAR(piped_loss, single_loss, 1e-5 * single_loss);

  // Killed after epoch 1 and resumed: the bits of two epochs in one go.
  auto whole = test::train_in(dir, "whole", mlp_config(), std::string(kPipeline) + " --set epochs=2");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto resumed = run_command(cli + " train --resume " + (dir / "piped/model.h5").string() +
                             " --set epochs=2 -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(compare_checkpoints(dir / "piped/model.h5", dir / "whole/model.h5")["same"]);

  auto summary = run_command(cli + " summary " + (dir / "single.json").string() + " " +
                             kPipeline + " --set pipeline.schedule=gpipe");
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("Placement on cpu:2: 1 replica of 2 stages, 4 micro-batches (gpipe)"),
            std::string::npos)
      << summary.out;
  EXPECT_NE(summary.out.find("cpu worker 1"), std::string::npos) << summary.out;
  // A plan this machine may lack still gets the model's summary; a wrong pipeline does not.
  summary = run_command(cli + " summary " + (dir / "single.json").string() +
                        " --devices cuda:7 2>&1");
  EXPECT_EQ(summary.exit_code, 0) << summary.out;
  EXPECT_NE(summary.out.find("Total params: 1,268"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("Placement not shown on this machine"), std::string::npos)
      << summary.out;
  summary = run_command(cli + " summary " + (dir / "single.json").string() +
                        " --set pipeline.stages=9");
  EXPECT_EQ(summary.exit_code, 2) << summary.out;
}

TEST(PipelineCli, WrongPipelineSettingsExitTwoNamingThePlace) {
  const fs::path dir = test::scratch_dir("pipeline-cli-errors");
  const std::string cli = test::tandem_cli();
  test::write_text(dir / "run.json", mlp_config().dump());
  struct Case {
    std::string args, place, message;
  };
  const std::vector<Case> cases = {
      {"--devices cpu:3 --set pipeline.stages=2", "'pipeline.stages'",
       "2 stages do not divide device plan 'cpu:3'"},
      {"--devices cpu:2 --set pipeline.stages='[[\"hidden\"],[\"nope\"]]'",
       "'pipeline.stages[1][0]'", "no layer 'nope'"},
      {"--devices cpu:2 --set pipeline.stages='[[\"hidden\",\"drop\"],[\"middle\"]]'",
       "'pipeline.stages'", "names no stage for 'out'"},
      {"--devices cpu:2 --set pipeline.stages='[[\"out\"],[\"hidden\",\"drop\",\"middle\"]]'",
       "'pipeline.stages[0]'", "reads 'middle' of the later stage 1"},
      {"--devices cpu:6 --set pipeline.stages=6", "'pipeline.stages'", "can be cut in at most 4"},
      {"--set pipeline.microbatches=0", "'pipeline.microbatches'", ""},
      {"--set pipeline.schedule=interleaved", "'pipeline.schedule'", ""},
      {"--set pipeline.stagse=2", "'pipeline.stagse'", ""},
      {"--set pipeline=2", "'pipeline'", ""},
      // A loss divided by the whole batch's kept steps: no micro-batch knows them.
      {std::string(kPipeline) + " --set loss='{\"class_name\": \"SparseCategoricalCrossentropy\", "
                                "\"config\": {\"ignore_class\": 3}}'",
       "'pipeline'", "the loss of output 'out' ignores a class"},
  };
  for (const Case& c : cases)
    for (const std::string& command :
         {" check " + (dir / "run.json").string(),
          " train " + (dir / "run.json").string() + " -q --run-dir " + (dir / "never").string()}) {
      auto r = run_command(cli + command + " " + c.args);
      EXPECT_EQ(r.exit_code, 2) << c.args << command << r.err;
      EXPECT_NE(r.err.find(c.place), std::string::npos) << c.args << ": " << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
    }
  // The GPU memory limit is checked on every plan: garbage in it is an error naming it.
  auto r = run_command("TANDEM_CUDA_MEMORY_LIMIT=12X " + cli + " train " +
                       (dir / "run.json").string() + " -q --run-dir " + (dir / "never").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'TANDEM_CUDA_MEMORY_LIMIT': expected a memory size"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "never")) << "a refused run left a folder";
  // So is the host's (TANDEM_HOST_MEMORY_LIMIT); a limit below the model's weights refuses the
  // run with the sizes, before anything is written.
  r = run_command("TANDEM_HOST_MEMORY_LIMIT=lots " + cli + " train " +
                  (dir / "run.json").string() + " -q --run-dir " + (dir / "never").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'TANDEM_HOST_MEMORY_LIMIT': expected a memory size"), std::string::npos)
      << r.err;
  r = run_command("TANDEM_HOST_MEMORY_LIMIT=1K " + cli + " train " + (dir / "run.json").string() +
                  " -q --run-dir " + (dir / "never").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("does not fit in host memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of 0 MiB (TANDEM_HOST_MEMORY_LIMIT)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "never")) << "a refused run left a folder";
  // The GPU settings too, on a machine without a GPU (they were read only by the CUDA module).
  for (const auto& [setting, message] : std::vector<std::pair<std::string, std::string>>{
           {"TANDEM_CONV2D=fast", "expected 'im2col', 'cudnn' or 'auto' (the default), got 'fast'"},
           {"TANDEM_CUDA_GRAPHS=yes", "turns CUDA graphs off with '0' (on: '1' or unset)"}}) {
    for (const std::string& command :
         {" check " + (dir / "run.json").string(),
          " train " + (dir / "run.json").string() + " -q --run-dir " + (dir / "never").string()}) {
      r = run_command(setting + " " + cli + command);
      EXPECT_EQ(r.exit_code, 2) << setting << command << r.err;
      EXPECT_NE(r.err.find(message), std::string::npos) << setting << ": " << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(dir / "never")) << "a refused run left a folder";
  // More micro-batches than a pipeline gets rows: allowed (the weights are right), but said.
  r = run_command(cli + " check " + (dir / "run.json").string() +
                  " --devices cpu:2 --set pipeline.stages=2 --set batch_size=6"
                  " --set pipeline.microbatches=8");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("pipeline.microbatches: 8 micro-batches for the 6 rows each pipeline gets "
                       "of a batch: 2 of them are empty every step"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tandem
