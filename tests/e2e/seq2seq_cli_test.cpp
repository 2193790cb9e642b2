// An encoder-decoder (seq2seq) as Keras 2's lstm_seq2seq example writes it, through the CLI: the
// encoder LSTM's final states (return_state) start the decoder LSTM (initial_state, in Keras 2's
// call list), both inputs of any length (None steps). It learns to reverse token sequences
// with teacher forcing; NumPy, stepping Keras' LSTM from the checkpoint's weights, computes the
// predictions Tandem wrote; cpu:3 and a two-stage pipeline train to cpu:1's weights; the summary
// shows the layers' several outputs and which one each reader takes. The same model with Bahdanau
// attention (AdditiveAttention of the decoder's steps over the encoder's) learns it too, and NumPy
// computes its predictions.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// `data OUT`: train.h5 and val.h5 — one-hot token sequences (4 tokens, 5 steps) for the encoder,
// the reversed sequence shifted right behind a start token for the decoder, the reversed
// sequence's token indices as targets.
// `check RUN_DIR DATA PRED [attention]`: NumPy's forward pass from the checkpoint's weights against
// PRED (with `attention`, the decoder's steps joined with their AdditiveAttention over the
// encoder's); prints the accuracy of PRED.
constexpr const char* kScript = R"PY(
import json, sys, numpy as np, h5py

def data(out):
    V, L = 4, 5
    rng = np.random.default_rng(3)
    for n, name in ((2000, "train"), (300, "val")):
        tokens = rng.integers(0, V, size=(n, L))
        target = tokens[:, ::-1]
        dec = np.zeros((n, L, V + 1), np.float32)
        dec[:, 0, V] = 1
        dec[:, 1:, :V] = np.eye(V, dtype=np.float32)[target[:, :-1]]
        with h5py.File(f"{out}/{name}.h5", "w") as f:
            f["enc"] = np.eye(V, dtype=np.float32)[tokens]
            f["dec"] = dec
            f["y"] = target.astype(np.float32)

def lstm(x, kernel, rec, bias, h, c):
    u = rec.shape[0]
    sig = lambda v: 1 / (1 + np.exp(-v))
    hs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ kernel + h @ rec + bias
        i, f, g, o = sig(z[:, :u]), sig(z[:, u:2 * u]), np.tanh(z[:, 2 * u:3 * u]), sig(z[:, 3 * u:])
        c = f * c + i * g
        h = o * np.tanh(c)
        hs.append(h)
    return np.stack(hs, 1), h, c

def softmax(v):
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

def check(run_dir, data_file, pred_file, attention=False):
    f = h5py.File(f"{run_dir}/model.h5", "r")
    def weights(layer):
        g = f["model_weights"][layer]
        return [np.asarray(g[n.decode()], np.float64) for n in g.attrs["weight_names"]]
    d = h5py.File(data_file, "r")
    enc, dec, y = (np.asarray(d[k], np.float64) for k in ("enc", "dec", "y"))
    zeros = np.zeros((enc.shape[0], 32))
    encoded, h, c = lstm(enc, *weights("encoder"), zeros, zeros)
    seq, _, _ = lstm(dec, *weights("decoder_lstm"), h, c)
    if attention:  # Keras' AdditiveAttention: sum of scale * tanh(query + key) over features
        (scale,) = weights("attention")
        scores = (np.tanh(seq[:, :, None, :] + encoded[:, None, :, :]) * scale).sum(-1)
        seq = np.concatenate([seq, softmax(scores) @ encoded], -1)
    kernel, bias = weights("decoder_dense")
    want = softmax(seq @ kernel + bias)
    got = np.load(pred_file)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want).max()
    assert err < 1e-5, err
    print(json.dumps({"accuracy": float((got.argmax(-1) == y).mean())}))

if sys.argv[1] == "data":
    data(sys.argv[2])
else:
    check(*sys.argv[2:5], attention=len(sys.argv) > 5)
)PY";

json lstm(const std::string& name, bool sequences, const json& inbound) {
  return {{"class_name", "LSTM"},
          {"name", name},
          {"config",
           {{"name", name},
            {"trainable", true},
            {"dtype", "float32"},
            {"return_sequences", sequences},
            {"return_state", true},
            {"go_backwards", false},
            {"stateful", false},
            {"unroll", false},
            {"time_major", false},
            {"units", 32}}},
          {"inbound_nodes", json::array({inbound})}};
}

json input(const std::string& name, int features) {
  return {{"class_name", "InputLayer"},
          {"name", name},
          {"config",
           {{"batch_input_shape", {nullptr, nullptr, features}},
            {"dtype", "float32"},
            {"sparse", false},
            {"ragged", false},
            {"name", name}}},
          {"inbound_nodes", json::array()}};
}

// Keras 2.15's to_json() of the lstm_seq2seq example's training model (latent_dim 32); with
// `attention`, the encoder returns its sequence too and the Dense reads the decoder's steps
// joined with their AdditiveAttention over it (Bahdanau's encoder-decoder).
json seq2seq(bool attention = false) {
  const auto ref = [](const char* layer, int tensor) {
    return json{layer, 0, tensor, json::object()};
  };
  json layers = json::array();
  layers.push_back(input("encoder_inputs", 4));
  layers.push_back(input("decoder_inputs", 5));
  layers.push_back(lstm("encoder", attention, json::array({ref("encoder_inputs", 0)})));
  layers.push_back(
      lstm("decoder_lstm", true,
           json::array({ref("decoder_inputs", 0), ref("encoder", 1), ref("encoder", 2)})));
  const char* decoded = "decoder_lstm";
  if (attention) {
    layers.push_back({{"class_name", "AdditiveAttention"},
                      {"name", "attention"},
                      {"config",
                       {{"name", "attention"},
                        {"trainable", true},
                        {"dtype", "float32"},
                        {"use_scale", true},
                        {"dropout", 0.0}}},
                      {"inbound_nodes",
                       json::array({json::array({ref("decoder_lstm", 0), ref("encoder", 0)})})}});
    layers.push_back({{"class_name", "Concatenate"},
                      {"name", "joined"},
                      {"config", {{"name", "joined"}, {"axis", -1}}},
                      {"inbound_nodes",
                       json::array({json::array({ref("decoder_lstm", 0), ref("attention", 0)})})}});
    decoded = "joined";
  }
  layers.push_back(
      {{"class_name", "Dense"},
       {"name", "decoder_dense"},
       {"config", {{"name", "decoder_dense"}, {"units", 4}, {"activation", "softmax"}}},
       {"inbound_nodes", json::array({json::array({ref(decoded, 0)})})}});
  return {{"class_name", "Functional"},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"},
          {"config",
           {{"name", "seq2seq"},
            {"layers", layers},
            {"input_layers", {{"encoder_inputs", 0, 0}, {"decoder_inputs", 0, 0}}},
            {"output_layers", {{"decoder_dense", 0, 0}}}}}};
}

class Seq2SeqCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("seq2seq");
    auto r = test::run_python(dir_ / "script.py", kScript, "data " + dir_.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static json run_config() {
    const auto h5 = [](const char* file) {
      return json{
          {"type", "hdf5"}, {"path", (dir_ / file).string()}, {"x", {"enc", "dec"}}, {"y", "y"}};
    };
    return {{"name", "seq2seq"},
            {"seed", 4},
            {"epochs", 3},
            {"batch_size", 32},
            {"model", seq2seq()},
            {"loss", "sparse_categorical_crossentropy"},
            {"metrics", {"accuracy"}},
            {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
            {"data", {{"train", h5("train.h5")}, {"validation", h5("val.h5")}}}};
  }
  static inline fs::path dir_;
};

// Trains `run` into dir/<name> on `plan` and predicts the validation data into <name>.npy.
void train_and_predict(const fs::path& dir, const std::string& name, const json& run,
                       const std::string& plan) {
  auto t = test::train_in(dir, name, run, "--devices " + plan);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  auto p = run_command(test::tandem_cli() + " predict " + (dir / (name + ".json")).string() +
                       " --weights " + (dir / name / "model.h5").string() + " -o " +
                       (dir / (name + ".npy")).string());
  ASSERT_EQ(p.exit_code, 0) << p.err;
}

TEST_F(Seq2SeqCli, TheEncodersStatesStartTheDecoderWhichLearnsAndNumPyAgrees) {
  ASSERT_NO_FATAL_FAILURE(train_and_predict(dir_, "s2s", run_config(), "cpu:1"));
  const json history = test::run_history(dir_ / "s2s");
  ASSERT_EQ(history.size(), 3u);
  // Measured 0.997 after 2 epochs; a decoder without the encoder's states can only guess the
  // first token (the others follow from its own inputs): at most 0.80.
  EXPECT_GE(history.back()["val_accuracy"].get<double>(), 0.95);
  auto c = test::run_python(dir_ / "script.py", kScript,
                            "check " + (dir_ / "s2s").string() + " " + (dir_ / "val.h5").string() +
                                " " + (dir_ / "s2s.npy").string());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_GE(json::parse(c.out)["accuracy"].get<double>(), 0.95);
}

// Contract 1 through the states: three replicas, and a pipeline of two stages (the encoder on
// one worker, the decoder on the other: the encoder's packed output and states cross between
// them, and their gradients back) with two micro-batches, train to one model's weights. Four
// steps, where the layouts' float rounding (their GEMMs block other row counts) stays at 1e-7
// of the predictions (measured); over epochs at Adam's 0.01 a recurrent model carries it to
// 1e-4, every layout alike.
TEST_F(Seq2SeqCli, ThreeReplicasAndTwoPipelineStagesTrainToOnesWeights) {
  json run = run_config();
  run["epochs"] = 1;
  run["steps_per_epoch"] = 4;
  const std::vector<std::pair<std::string, std::string>> layouts{
      {"one", "cpu:1"},
      {"replicas", "cpu:3"},
      {"pipeline", "cpu:2 --set pipeline.stages=2 --set pipeline.microbatches=2"}};
  for (const auto& [name, plan] : layouts)
    ASSERT_NO_FATAL_FAILURE(train_and_predict(dir_, "steps-" + name, run, plan));
  for (const char* other : {"replicas", "pipeline"})
    EXPECT_TRUE(test::npy_close(dir_ / ("steps-" + std::string(other) + ".npy"),
                                dir_ / "steps-one.npy", 1e-5, dir_))
        << other;
}

// Bahdanau's form: the decoder's steps attend over the encoder's (AdditiveAttention, a learned
// scale per feature) and the Dense reads both. It learns the reversal, and NumPy's forward pass
// from the checkpoint's weights, additive scores included, computes Tandem's predictions.
TEST_F(Seq2SeqCli, WithBahdanauAttentionOverTheEncodersStepsItLearnsAndNumPyAgrees) {
  json run = run_config();
  run["model"] = seq2seq(true);
  ASSERT_NO_FATAL_FAILURE(train_and_predict(dir_, "attention", run, "cpu:1"));
  const json history = test::run_history(dir_ / "attention");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_GE(history.back()["val_accuracy"].get<double>(), 0.95);
  auto c =
      test::run_python(dir_ / "script.py", kScript,
                       "check " + (dir_ / "attention").string() + " " + (dir_ / "val.h5").string() +
                           " " + (dir_ / "attention.npy").string() + " attention");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_GE(json::parse(c.out)["accuracy"].get<double>(), 0.95);
}

TEST_F(Seq2SeqCli, TheSummaryShowsEachOutputAndWhichOneEachReaderTakes) {
  test::write_text(dir_ / "summary.json", run_config().dump());
  auto s = run_command(test::tandem_cli() + " summary " + (dir_ / "summary.json").string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find(" encoder (LSTM)              [(None, 32), (None, 32), (None, 32)] 4,736"),
            std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("'encoder[0][1]',"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("'encoder[0][2]']"), std::string::npos) << s.out;
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
