// Mixed precision through the `tandem` binary: a bf16 run keeps float32 weights (h5py reads them),
// resumes to the bits of an uninterrupted run, and `evaluate` in bf16 gives PyTorch's loss on
// bfloat16-rounded operands summed in double (not the float32 loss); Keras' mixed dtype policies
// in a model's layers select bf16 and are written back; every wrong precision setting exits 2
// naming its place.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend/ops.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

constexpr const char* kWriteData = R"PY(
import sys, h5py, numpy as np
rng = np.random.default_rng(3)
x = rng.normal(size=(96, 12)).astype(np.float32)
label = np.argmax(x @ rng.normal(size=(12, 3)), axis=1).astype(np.int64)
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = x
    f["label"] = label
)PY";

// A Dense layer's config, with a dtype when given.
json dense(const char* name, int units, const char* activation, const json& dtype = json()) {
  json c = {{"name", name}, {"units", units}, {"activation", activation}};
  if (!dtype.is_null()) c["dtype"] = dtype;
  return {{"class_name", "Dense"}, {"config", c}};
}

json model(const json& hidden_dtype = json(), const json& out_dtype = json()) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"name", "mixed"},
            {"layers",
             {{{"class_name", "InputLayer"},
               {"config", {{"batch_input_shape", {nullptr, 12}}, {"name", "x"}}}},
              dense("hidden", 16, "relu", hidden_dtype),
              dense("out", 3, "softmax", out_dtype)}}}}};
}

struct PrecisionCli : ::testing::Test {
  void SetUp() override {
    dir = test::scratch_dir("precision-cli");
    data = dir / "data.h5";
    auto w = test::run_python(dir / "write.py", kWriteData, data.string());
    ASSERT_EQ(w.exit_code, 0) << w.err;
  }

  json config() const {
    return {{"name", "precision"},
            {"seed", 4},
            {"epochs", 2},
            {"batch_size", 16},
            {"precision", "bf16"},
            {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
            {"loss", "sparse_categorical_crossentropy"},
            {"metrics", {"accuracy"}},
            {"model", model()},
            {"data",
             {{"train", {{"type", "hdf5"}, {"path", data.string()}, {"x", "x"}, {"y", "label"}}}}}};
  }

  fs::path dir, data;
};

#define SKIP_WITHOUT_BF16()                                                                      \
  if (const std::string why = backend::cpu_precision_unavailable(Precision::bf16); !why.empty()) \
  GTEST_SKIP() << why

// A bf16 run on a CPU whose bf16 dot products are slower than its float32 FMAs (an Intel Xeon
// without AMX) says so before it starts, even under -q; where bf16 pays, and in fp32, it does not.
// The rate is timed again in this process: far from 1 on every CPU measured (0.49 or about 2).
TEST_F(PrecisionCli, Bf16RunWarnsWhereThisCpuMultipliesBf16SlowerThanFloat32) {
  SKIP_WITHOUT_BF16();
  const std::optional<double> rate = backend::cpu_bf16_product_rate();
  json c = config();
  c["epochs"] = 1;
  auto bf16 = test::train_in(dir, "bf16-rate", c);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  const bool warned = bf16.err.find("this CPU multiplies bfloat16 at") != std::string::npos;
  EXPECT_EQ(warned, rate && *rate < 1.0) << "rate " << rate.value_or(-1) << ": " << bf16.err;
  if (warned) {
    EXPECT_NE(bf16.err.find("slower than fp32 would"), std::string::npos) << bf16.err;
  }
  c["precision"] = "fp32";
  auto fp32 = test::train_in(dir, "fp32-rate", c);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  EXPECT_EQ(fp32.err.find("multiplies bfloat16"), std::string::npos) << fp32.err;
}

TEST_F(PrecisionCli, Bf16KeepsFloat32WeightsResumesBitwiseAndEvaluatesOnRoundedOperands) {
  SKIP_WITHOUT_BF16();
  const std::string cli = test::tandem_cli();
  auto whole = test::train_in(dir, "whole", config());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(json::parse(test::read_text(dir / "whole/config.json"))["precision"], "bf16");
  auto first = test::train_in(dir, "split", config(), "--set epochs=1");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed = run_command(cli + " train --resume " + (dir / "split/model.h5").string() +
                             " --set epochs=2 -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;

  // The evaluation in bf16, and PyTorch's: products of bfloat16-rounded operands in double.
  auto ev = run_command(cli + " evaluate " + (dir / "whole.json").string() + " --weights " +
                        (dir / "whole/model.h5").string() + " --split train -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  const double loss = json::parse(ev.out)["loss"].get<double>();
  const std::string reference =
      std::string(test::system_python()) +
      " -c '\n"
      "import h5py, json, sys, numpy as np, torch\n"
      "a, b = (h5py.File(p, \"r\") for p in sys.argv[2:4])\n"
      "for layer in (\"hidden\", \"out\"):\n"
      "  for w in (\"kernel:0\", \"bias:0\"):\n"
      "    x, y = a[\"model_weights\"][layer][layer][w], b[\"model_weights\"][layer][layer][w]\n"
      "    assert x.dtype == np.float32, (layer, w, x.dtype)\n"
      "    assert x[()].tobytes() == y[()].tobytes(), (layer, w)\n"
      "d = h5py.File(sys.argv[1], \"r\")\n"
      "m = a[\"model_weights\"]\n"
      "t = lambda v: torch.tensor(v[()], dtype=torch.float32)\n"
      "low = lambda v: v.bfloat16().double()\n"
      "x, label = t(d[\"x\"]), torch.tensor(d[\"label\"][()])\n"
      "k1, b1 = t(m[\"hidden/hidden/kernel:0\"]), t(m[\"hidden/hidden/bias:0\"]).double()\n"
      "k2, b2 = t(m[\"out/out/kernel:0\"]), t(m[\"out/out/bias:0\"]).double()\n"
      "def loss(r):\n"
      "  h = torch.relu(r(x) @ r(k1) + b1).float()\n"
      "  p = torch.softmax(r(h) @ r(k2) + b2, dim=1).clamp(1e-7, 1 - 1e-7)\n"
      "  return float(-torch.log(p[torch.arange(len(label)), label]).mean())\n"
      "print(json.dumps({\"bf16\": loss(low), \"fp32\": loss(lambda v: v.double())}))\n' " +
      data.string() + " " + (dir / "whole/model.h5").string() + " " +
      (dir / "split/model.h5").string();
  auto ref = run_command(reference);
  ASSERT_EQ(ref.exit_code, 0) << ref.err << ref.out;
  const json want = json::parse(ref.out);
  const double bf16 = want["bf16"].get<double>(), fp32 = want["fp32"].get<double>();
  EXPECT_NEAR(loss, bf16, 2e-6 * bf16);
  EXPECT_GT(std::fabs(loss - fp32), 50 * 2e-6 * bf16) << "bf16 " << bf16 << ", fp32 " << fp32;
}

// Keras' mixed policies in the layers (Keras 2's Policy and Keras 3's DTypePolicy forms, the
// output layer kept at float32 as Keras' guide does) make the run bf16 and go back into the
// checkpoint's model_config as they came.
TEST_F(PrecisionCli, KerasMixedPolicyLayersSelectBf16AndAreWrittenBack) {
  SKIP_WITHOUT_BF16();
  json c = config();
  c.erase("precision");
  const json keras2 = {{"class_name", "Policy"}, {"config", {{"name", "mixed_bfloat16"}}}};
  const json keras3 = {{"module", "keras"},
                       {"class_name", "DTypePolicy"},
                       {"config", {{"name", "mixed_bfloat16"}}},
                       {"registered_name", nullptr}};
  c["model"] = model(keras2, "float32");
  auto r = test::train_in(dir, "keras2", c, "--set epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(test::read_text(dir / "keras2/config.json"))["precision"], "bf16");
  auto check = run_command(test::tandem_cli() + " check " + (dir / "keras2.json").string());
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("devices cpu:1 in bf16"), std::string::npos) << check.out;
  c["model"] = model(keras3, "float32");
  c["precision"] = "bf16";  // agreeing with the layers is fine
  r = test::train_in(dir, "keras3", c, "--set epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto read = run_command(
      std::string(test::system_python()) +
      " -c '\n"
      "import h5py, json, sys\n"
      "c = json.loads(h5py.File(sys.argv[1], \"r\").attrs[\"model_config\"])\n"
      "print(json.dumps([l[\"config\"].get(\"dtype\") for l in c[\"config\"][\"layers\"]]))\n' " +
      (dir / "keras3/model.h5").string());
  ASSERT_EQ(read.exit_code, 0) << read.err;
  const json dtypes = json::parse(read.out);
  ASSERT_EQ(dtypes.size(), 3u) << dtypes.dump();
  EXPECT_EQ(dtypes[1], keras3);
  EXPECT_EQ(dtypes[2], "float32");
}

// Keras 3's LossScaleOptimizer as to_json() writes it, on a float32 run: the scale starts at 4
// and doubles every 3 good steps (6 steps an epoch), batch_ended and epoch_ended report it, the
// checkpoint keeps it (`tandem inspect` shows it) and an epoch resumed from it ends on the bits
// of the uninterrupted run (h5py compares the weights and the optimizer slots).
TEST_F(PrecisionCli, LossScaleOptimizerTrainsReportsItsScaleAndResumesBitwise) {
  json c = config();
  c.erase("precision");
  c["optimizer"] = {{"module", "keras.optimizers"},
                    {"class_name", "LossScaleOptimizer"},
                    {"config",
                     {{"name", "loss_scale_optimizer"},
                      {"inner_optimizer",
                       {{"module", "keras.optimizers"},
                        {"class_name", "Adam"},
                        {"config", {{"name", "adam"}, {"learning_rate", 0.01}}},
                        {"registered_name", nullptr}}},
                      {"initial_scale", 4.0},
                      {"dynamic_growth_steps", 3}}},
                    {"registered_name", nullptr}};
  auto whole = test::train_in(dir, "scaled", c);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::vector<double> scales;
  double epoch_scale = 0;
  std::istringstream events(test::read_text(dir / "scaled/events.jsonl"));
  for (std::string line; std::getline(events, line);) {
    const json e = json::parse(line);
    if (e["event"] == "batch_ended") scales.push_back(e.at("loss_scale").get<double>());
    if (e["event"] == "epoch_ended") {
      epoch_scale = e.at("loss_scale").get<double>();
      EXPECT_EQ(e.at("skipped_steps"), 0);
    }
  }
  EXPECT_EQ(scales, (std::vector<double>{4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64}));
  EXPECT_EQ(epoch_scale, 64);

  auto first = test::train_in(dir, "scaled-split", c, "--set epochs=1");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string cli = test::tandem_cli();
  auto inspect = run_command(cli + " inspect " + (dir / "scaled-split/model.h5").string());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("optimizer: LossScaleOptimizer"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("loss scale: 16"), std::string::npos) << inspect.out;
  auto resumed = run_command(cli + " train --resume " + (dir / "scaled-split/model.h5").string() +
                             " --set epochs=2 -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  auto same = run_command(
      std::string(test::system_python()) +
      " -c '\n"
      "import h5py, sys\n"
      "a, b = (h5py.File(p, \"r\") for p in sys.argv[1:3])\n"
      "names = []\n"
      "def visit(name, obj):\n"
      "  if isinstance(obj, h5py.Dataset) and not name.startswith(\"tandem/state\"):\n"
      "    assert obj[()].tobytes() == b[name][()].tobytes(), name\n"
      "    names.append(name)\n"
      "a.visititems(visit)\n"
      "print(len(names))\n' " +
      (dir / "scaled/model.h5").string() + " " + (dir / "scaled-split/model.h5").string());
  ASSERT_EQ(same.exit_code, 0) << same.err << same.out;
  EXPECT_GE(std::stoi(same.out), 12) << "4 weights and 8 Adam slots at least";

  // Garbage in the wrapper is a config error naming its place, before any folder is made.
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"initial_scale", -1}, {"dynamic_growth_steps", 0}, {"inner_optimizer", "adamx"}}) {
    json bad = c;
    bad["optimizer"]["config"][key] = value;
    const fs::path path = dir / ("bad-" + key + ".json");
    test::write_text(path, bad.dump());
    auto r = run_command(cli + " train " + path.string() + " --run-dir " +
                         (dir / ("bad-" + key)).string() + " -q");
    EXPECT_EQ(r.exit_code, 2) << key << r.err;
    EXPECT_NE(r.err.find("optimizer.config." + key), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / ("bad-" + key)));
  }
}

TEST_F(PrecisionCli, WrongPrecisionSettingsExitTwoNamingThePlace) {
  const json policy = {{"class_name", "Policy"}, {"config", {{"name", "mixed_bfloat16"}}}};
  struct Case {
    const char* tag;
    json config;
    const char* place;
    const char* message;
    const char* env;  // variables to run the commands with
  };
  std::vector<Case> cases;
  const auto with = [&](const char* key, const json& value) {
    json c = config();
    c[key] = value;
    return c;
  };
  cases.push_back(
      {"unknown", with("precision", "bf8"), "precision", "unknown precision 'bf8'", ""});
  cases.push_back({"number", with("precision", 16), "precision", "string", ""});
  cases.push_back({"fp16-cpu", with("precision", "fp16"), "precision", "CUDA GPUs only", ""});
  cases.push_back({"pure-policy", with("model", model("bfloat16")),
                   "model.config.layers[1].config.dtype", "use 'mixed_bfloat16'", ""});
  cases.push_back({"unknown-policy", with("model", model("mixed_int8")),
                   "model.config.layers[1].config.dtype", "unknown dtype policy", ""});
  cases.push_back({"garbage-policy", with("model", model(json{{"config", 3}})),
                   "model.config.layers[1].config.dtype", "dtype policy", ""});
  json fp16_policy = with("model", model("mixed_float16"));
  fp16_policy.erase("precision");
  cases.push_back({"fp16-policy", fp16_policy, "at 'model': layer '",
                   "has the dtype policy 'mixed_float16' (fp16): ", ""});
  cases.push_back({"foreign-policy",
                   with("model", model(json{{"class_name", "Foo"},
                                            {"config", {{"name", "mixed_bfloat16"}}}})),
                   "model.config.layers[1].config.dtype.class_name",
                   "expected a Keras dtype policy", ""});
  cases.push_back({"policy-extra-key",
                   with("model", model(json{{"class_name", "DTypePolicy"},
                                            {"config", {{"name", "mixed_bfloat16"}, {"foo", 1}}}})),
                   "model.config.layers[1].config.dtype.config.foo",
                   "unknown key in a dtype policy's config", ""});
  json contradiction = with("model", model(policy));
  contradiction["precision"] = "fp32";
  cases.push_back({"contradiction", contradiction, "precision", "contradicts the model", ""});
  cases.push_back({"two-policies", with("model", model(policy, "mixed_float16")), "model",
                   "one mixed precision", ""});
  // A GPU no machine has: the plan is refused before the precision is looked at.
  cases.push_back({"cuda", with("devices", "cuda:99"), "", "cuda:99", ""});
  cases.push_back(
      {"isa", config(), "precision", "AVX-512 BF16", "ONEDNN_MAX_CPU_ISA=AVX512_CORE "});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tag);
    const fs::path path = dir / (std::string(c.tag) + ".json");
    test::write_text(path, c.config.dump());
    for (const std::string& command :
         {" check " + path.string(),
          " train " + path.string() + " --run-dir " + (dir / c.tag).string() + " -q"}) {
      auto r = run_command(std::string(c.env) + test::tandem_cli() + command);
      EXPECT_EQ(r.exit_code, 2) << command << r.out << r.err;
      EXPECT_NE(r.err.find(c.place), std::string::npos) << command << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos) << command << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / c.tag / "model.h5"));
  }
}

}  // namespace
}  // namespace tandem
