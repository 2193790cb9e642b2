// `--weights` with files Keras wrote, the way users bring them: a model saved from Keras'
// multi_gpu_model (the template nested as one layer of a wrapper with Lambda slices and a
// Concatenate; seed 001) evaluates exactly as the template's own checkpoint does, and Tandem
// says it unwrapped it. The file is written by h5py in Keras 2's layout, as Keras writes it
// (empty weight_names as an empty float array, nested weight names "dense/kernel:0").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

constexpr const char* kWrap = R"PY(
import sys, h5py, numpy as np
src, dst = sys.argv[1], sys.argv[2]
def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)
with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
    g.attrs["keras_version"] = b"2.2.4"
    g.attrs["backend"] = b"tensorflow"
    weights = g.create_group("model_weights")
    template = weights.create_group("sequential_1")
    names = []
    for layer in (text(n) for n in f["model_weights"].attrs["layer_names"]):
        group = f["model_weights"][layer]
        for w in (text(n) for n in group.attrs["weight_names"]):
            template.create_dataset(w, data=group[w][()])
            names.append(w.encode())
    template.attrs["weight_names"] = names
    for empty in ("input_1", "lambda_1", "lambda_2", "dense_2"):
        weights.create_group(empty).attrs["weight_names"] = np.array([])
    weights.attrs["layer_names"] = [n.encode() for n in
                                    ("input_1", "lambda_1", "lambda_2", "sequential_1", "dense_2")]
)PY";

TEST(KerasWeightsCli, AMultiGpuModelFileLoadsItsNestedTemplate) {
  const fs::path dir = test::scratch_dir("keras-weights");
  const std::string synthetic =
      R"('{"type": "synthetic", "samples": 256, "x_shape": [28, 28], "task": "classes", )"
      R"("classes": 10, "seed": 3}')";
  const std::string data = " --set data.train=" + synthetic + " --set data.validation=" + synthetic;
  auto r = run_command(test::tandem_cli() + " train --set epochs=1" + data + " --run-dir " +
                       (dir / "run").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto w = test::run_python(dir / "wrap.py", kWrap,
                            (dir / "run" / "model.h5").string() + " " +
                                (dir / "wrapped.h5").string());
  ASSERT_EQ(w.exit_code, 0) << w.err;

  const std::string evaluate =
      test::tandem_cli() + " evaluate " + (dir / "run" / "config.json").string() + " --weights ";
  auto own = run_command(evaluate + (dir / "run" / "model.h5").string() + " -q");
  ASSERT_EQ(own.exit_code, 0) << own.err;
  auto wrapped = run_command(evaluate + (dir / "wrapped.h5").string());
  ASSERT_EQ(wrapped.exit_code, 0) << wrapped.err;
  EXPECT_NE(wrapped.err.find("a multi_gpu_model file: loaded the weights of the template model "
                             "nested as its layer 'sequential_1'"),
            std::string::npos)
      << wrapped.err;
  const json a = json::parse(own.out), b = json::parse(wrapped.out.substr(wrapped.out.find('{')));
  EXPECT_EQ(a["loss"], b["loss"]);
  EXPECT_EQ(a["accuracy"], b["accuracy"]);
  // predict (always quiet but for warnings) says so too.
  auto predicted = run_command(test::tandem_cli() + " predict " +
                               (dir / "run" / "config.json").string() + " --weights " +
                               (dir / "wrapped.h5").string() + " -o " + (dir / "p.npy").string());
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  EXPECT_NE(predicted.err.find("loaded the weights of the template model nested as its layer "
                               "'sequential_1'"),
            std::string::npos)
      << predicted.err;

  // A wrapper whose template lacks one of the model's layers is refused, naming the file.
  auto cut = run_command(std::string(test::system_python()) + " -c \"import h5py; f = h5py.File('" +
                         (dir / "wrapped.h5").string() +
                         "', 'r+'); t = f['model_weights/sequential_1']; "
                         "t.attrs['weight_names'] = t.attrs['weight_names'][:2]\"");
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  auto refused = run_command(evaluate + (dir / "wrapped.h5").string() + " -q");
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.err.find("wrapped.h5: holds weights for 1 layers"), std::string::npos)
      << refused.err;
}

}  // namespace
}  // namespace tandem
