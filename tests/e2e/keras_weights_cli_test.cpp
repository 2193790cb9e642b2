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
import json, sys, h5py, numpy as np
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
    # The wrapper's model_config as Keras 2.2.4 wrote it: the input sliced by two Lambdas (their
    # Python code marshalled), the template called on each slice, the halves concatenated.
    template = json.loads(text(f.attrs["model_config"]))
    template["config"]["name"] = "sequential_1"  # Keras names the nested model's entry so
    shape = [None, 28, 28]
    def sliced(i):
        return {"name": f"lambda_{i + 1}", "class_name": "Lambda",
                "config": {"name": f"lambda_{i + 1}", "trainable": True,
                           "function": ["4wMAAAAAAAAAAwAAAAUAAABTAAAAcwYAAAB8AGQBGQBTACkCTg==", None, None],
                           "function_type": "lambda", "output_shape": shape[1:],
                           "output_shape_type": "raw", "arguments": {"i": i, "parts": 2}},
                "inbound_nodes": [[["input_1", 0, 0, {}]]]}
    wrapper = {"class_name": "Model", "config": {"name": "model_1", "layers": [
        {"name": "input_1", "class_name": "InputLayer",
         "config": {"batch_input_shape": shape, "dtype": "float32", "sparse": False,
                    "name": "input_1"}, "inbound_nodes": []},
        sliced(0), sliced(1),
        {"name": "sequential_1", "class_name": "Sequential", "config": template["config"],
         "inbound_nodes": [[["lambda_1", 0, 0, {}]], [["lambda_2", 0, 0, {}]]]},
        {"name": "dense_2", "class_name": "Concatenate",
         "config": {"name": "dense_2", "trainable": True, "axis": 0},
         "inbound_nodes": [[["sequential_1", 1, 0, {}], ["sequential_1", 2, 0, {}]]]}],
        "input_layers": [["input_1", 0, 0]], "output_layers": [["dense_2", 0, 0]]}}
    g.attrs["model_config"] = json.dumps(wrapper).encode()
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

  // tandem import makes a run config of the template, saying what it left out; it evaluates
  // the wrapper's weights as the template's own run config does.
  auto imported =
      run_command(test::tandem_cli() + " import " + (dir / "wrapped.h5").string() + " -o " +
                  (dir / "imported.json").string() + " --set data.train=" + synthetic +
                  " --set data.validation=" + synthetic);
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find("wrapped.h5: a multi_gpu_model file: imported its template model "
                              "'sequential_1', which the wrapper called on 2 slices of each "
                              "batch (one per GPU)"),
            std::string::npos)
      << imported.err;
  const json run = json::parse(test::read_text(dir / "run" / "config.json"));
  const json made = json::parse(test::read_text(dir / "imported.json"));
  EXPECT_EQ(made["model"]["class_name"], "Sequential");
  EXPECT_EQ(made["model"]["config"]["name"], "sequential_1");
  std::vector<std::string> names;
  for (const json& layer : made["model"]["config"]["layers"])
    names.push_back(layer["config"]["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"image", "flatten", "dense", "dense_1", "logits"}));
  auto from_import = run_command(
      test::tandem_cli() + " evaluate " + (dir / "imported.json").string() + " --weights " +
      (dir / "wrapped.h5").string() + " --set 'loss=" + run["loss"].dump() +
      "' --set optimizer=adam --set batch_size=" + run["batch_size"].dump() + " -q");
  ASSERT_EQ(from_import.exit_code, 0) << from_import.err;
  EXPECT_EQ(json::parse(from_import.out)["loss"], a["loss"]);

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
