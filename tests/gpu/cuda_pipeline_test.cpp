// CUDA pipelines (cuda/replica/cuda_pipeline_replica.cpp) through the public ReplicaModel, against
// the CPU (label "gpu"): a model cut into stages on GPUs trains as the template trains alone on
// the CPU (contract 1, to float rounding), the two schedules give the same bits, stages on two
// GPUs compute what stages sharing one do, and evaluate and predict cross the stages. Stages may
// share a GPU (the hand-offs are then copies within it), so one GPU runs every test but the
// multi-GPU ones, which skip. Skipped when no CUDA device is usable (CI).
#include <gtest/gtest.h>

#include <string>

#include "gpu/gpu_test_support.hpp"
#include "gpu/replica_test_support.hpp"
#include "tandem/devices.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace {

using gpu_test::layer;
using gpu_test::sequential;
using namespace replica_test;

DevicePlan gpus(std::vector<int> indices, const std::string& text) {
  DevicePlan p{{}, text};
  for (int i : indices) p.replicas.push_back({DeviceKind::cuda, i});
  return p;
}

json mlp() {
  return sequential({12}, json::array({layer("Dense", {{"units", 16}, {"activation", "relu"}}),
                                       layer("Dropout", {{"rate", 0.25}}),
                                       layer("Dense", {{"units", 16}, {"activation", "tanh"}}),
                                       layer("Dense", {{"units", 5}})}));
}

// Dense 6 relu -> Dropout added to the input, beside a Dense 4 of the input, concatenated ->
// Dense 5: cut after the Add and the side branch, two tensors cross the boundary.
json residual() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "residual", "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 12]},
       "inbound_nodes": []},
      {"class_name": "Dense", "name": "inner", "config": {"name": "inner", "units": 12,
       "activation": "relu"}, "inbound_nodes": [[["x", 0, 0, {}]]]},
      {"class_name": "Dropout", "name": "drop", "config": {"name": "drop", "rate": 0.25},
       "inbound_nodes": [[["inner", 0, 0, {}]]]},
      {"class_name": "Add", "name": "skip", "config": {"name": "skip"},
       "inbound_nodes": [[["drop", 0, 0, {}], ["x", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "side", "config": {"name": "side", "units": 4},
       "inbound_nodes": [[["x", 0, 0, {}]]]},
      {"class_name": "Concatenate", "name": "join", "config": {"name": "join", "axis": -1},
       "inbound_nodes": [[["skip", 0, 0, {}], ["side", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "logits", "config": {"name": "logits", "units": 5},
       "inbound_nodes": [[["join", 0, 0, {}]]]}],
      "input_layers": [["x", 0, 0]], "output_layers": [["logits", 0, 0]]}})");
}

// Dense 8 -> BatchNormalization (replica-local statistics) -> Dense 5: the moving statistics a
// training forward moves.
json batch_norm_mlp() {
  return sequential({12}, json::array({layer("Dense", {{"units", 8}}),
                                       layer("BatchNormalization", {{"momentum", 0.9}}),
                                       layer("Dense", {{"units", 5}})}));
}

const json kAdam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
const json kLoss = loss_spec("SparseCategoricalCrossentropy", {{"from_logits", true}});

// 10 steps of 45 samples (micro-batches of unequal size) on both sides; every step's loss and
// the final weights agree to `tolerance` (relative).
void expect_same_training(Side& a, Side& b, double tolerance) {
  for (int step = 0; step < 10; ++step) {
    Batch batch =
        make_batch({12}, {5}, 45, Targets::sparse, 700 + static_cast<std::uint64_t>(step));
    const StepSums sa = a.meta->forward_backward(batch, *a.loss, a.metrics);
    const StepSums sb = b.meta->forward_backward(batch, *b.loss, b.metrics);
    EXPECT_LE(relative(sa.loss.sum, sb.loss.sum), tolerance) << "step " << step;
    a.meta->apply_update();
    b.meta->apply_update();
  }
  std::string where;
  EXPECT_LE(worst_relative_difference(a.meta->template_model(), b.meta->template_model(), &where),
            tolerance)
      << where;
}

TEST(CudaPipeline, TwoStagesOnOneGpuTrainAsTheCpuTemplateInEitherSchedule) {
  REQUIRE_GPU();
  std::vector<std::unique_ptr<Side>> piped;
  for (const char* schedule : {"1f1b", "gpipe"}) {
    SCOPED_TRACE(schedule);
    Side cpu(mlp(), kAdam, kLoss, json::array(), "cpu", Precision::fp32);
    piped.push_back(
        std::make_unique<Side>(mlp(), kAdam, kLoss, gpus({0, 0}, "cuda:0 twice"),
                               json{{"stages", 2}, {"microbatches", 3}, {"schedule", schedule}}));
    expect_same_training(*piped.back(), cpu, 1e-3);
  }
  // Both schedules run each stage's backwards in micro-batch order: the same sums, bit for bit.
  std::string where;
  EXPECT_EQ(worst_relative_difference(piped[0]->meta->template_model(),
                                      piped[1]->meta->template_model(), &where),
            0.0)
      << where;
}

TEST(CudaPipeline, AResidualGraphCutAtItsJoinTrainsAsTheCpuTemplate) {
  REQUIRE_GPU();
  Side cpu(residual(), kAdam, kLoss, json::array(), "cpu", Precision::fp32);
  Side piped(residual(), kAdam, kLoss, gpus({0, 0}, "cuda:0 twice"),
             json{{"stages", {{"inner", "drop", "skip", "side"}, {"join", "logits"}}},
                  {"microbatches", 4}});
  expect_same_training(piped, cpu, 1e-3);
}

// BatchNormalization's moving statistics move once a step, each micro-batch from the step's
// starting values (pipeline_moving_state.hpp), as the CPU pipeline moves them — they moved once
// per micro-batch when the slots shared the owner's — and a checkpoint's statistics pushed to
// the stages reach evaluate.
TEST(CudaPipeline, MovingStatisticsMoveOncePerStepAsOnTheCpu) {
  REQUIRE_GPU();
  const json pipeline = {{"stages", 2}, {"microbatches", 4}};
  Side cpu(batch_norm_mlp(), kAdam, kLoss, DevicePlan::cpus(2), pipeline);
  Side piped(batch_norm_mlp(), kAdam, kLoss, gpus({0, 0}, "cuda:0 twice"), pipeline);
  expect_same_training(piped, cpu, 1e-4);
  Model& t = piped.meta->template_model();
  for (Parameter* p : t.parameters())
    if (p->name == "moving_mean" || p->name == "moving_variance")
      for (std::int64_t k = 0; k < p->value.size(); ++k) p->value[k] = 0.25f + 0.01f * k;
  piped.meta->broadcast_from_template();
  cpu.meta->template_model().copy_weights_from(t);
  cpu.meta->broadcast_from_template();
  const Batch b = make_batch({12}, {5}, 21, Targets::sparse, 9);
  const StepSums e_gpu = piped.meta->evaluate(b, *piped.loss, piped.metrics);
  const StepSums e_cpu = cpu.meta->evaluate(b, *cpu.loss, cpu.metrics);
  EXPECT_LE(relative(e_gpu.loss.sum, e_cpu.loss.sum), 1e-5);
}

// Weights set on the host template reach every stage; evaluate and predict run through them.
TEST(CudaPipeline, EvaluateAndPredictCrossTheStages) {
  REQUIRE_GPU();
  Side piped(mlp(), kAdam, kLoss, gpus({0, 0, 0}, "cuda:0 three times"),
             json{{"stages", 3}, {"microbatches", 2}});
  Model& t = piped.meta->template_model();
  Rng rng(5);
  for (Parameter* p : t.parameters())
    for (std::int64_t k = 0; k < p->value.size(); ++k) p->value[k] = rng.uniform() - 0.5f;
  piped.meta->broadcast_from_template();
  const Batch b = make_batch({12}, {5}, 21, Targets::sparse, 9);
  Tensor on_gpu({21, 5});
  piped.meta->predict(b.x, on_gpu.data());
  const Tensor on_cpu = t.forward(b.x, false).clone();
  for (std::int64_t i = 0; i < on_cpu.size(); ++i) EXPECT_NEAR(on_gpu[i], on_cpu[i], 1e-5) << i;
  Side cpu(mlp(), kAdam, kLoss, json::array(), "cpu", Precision::fp32);
  cpu.meta->template_model().copy_weights_from(t);
  cpu.meta->broadcast_from_template();
  const StepSums e_gpu = piped.meta->evaluate(b, *piped.loss, piped.metrics);
  const StepSums e_cpu = cpu.meta->evaluate(b, *cpu.loss, cpu.metrics);
  EXPECT_LE(relative(e_gpu.loss.sum, e_cpu.loss.sum), 1e-5);
  EXPECT_EQ(e_gpu.loss.count, e_cpu.loss.count);
}

// Keras' global_clipnorm takes the norm of every gradient, whichever stage holds it; an
// optimizer the stages cannot clip, or a model they cannot pipeline, is refused up front.
TEST(CudaPipeline, GlobalClipnormSpansTheStages) {
  REQUIRE_GPU();
  const json clipped = {{"class_name", "SGD"},
                        {"config", {{"learning_rate", 0.5}, {"global_clipnorm", 0.05}}}};
  Side cpu(mlp(), clipped, kLoss, json::array(), "cpu", Precision::fp32);
  Side piped(mlp(), clipped, kLoss, gpus({0, 0}, "cuda:0 twice"),
             json{{"stages", 2}, {"microbatches", 2}});
  expect_same_training(piped, cpu, 1e-3);
  const json both = {
      {"class_name", "SGD"},
      {"config", {{"learning_rate", 0.5}, {"global_clipnorm", 0.05}, {"clipnorm", 0.1}}}};
  try {
    Side refused(mlp(), both, kLoss, gpus({0, 0}, "cuda:0 twice"), json{{"stages", 2}});
    ADD_FAILURE() << "global_clipnorm with clipnorm was pipelined";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("global_clipnorm with clipnorm"), std::string::npos)
        << e.what();
  }
}

TEST(CudaPipeline, StagesOnTwoGpusComputeWhatStagesSharingOneDo) {
  REQUIRE_GPU();
  if (discover_devices().gpus.size() < 2) GTEST_SKIP() << "one GPU";
  const json pipeline = {{"stages", 2}, {"microbatches", 4}};
  Side shared(mlp(), kAdam, kLoss, gpus({0, 0}, "cuda:0 twice"), pipeline);
  Side apart(mlp(), kAdam, kLoss, gpus({0, 1}, "cuda:0,1"), pipeline);
  expect_same_training(apart, shared, 1e-6);
}

// Two replicas of a two-stage pipeline: each stage's gradients summed over the replicas' GPUs of
// that stage (one NCCL communicator per stage).
TEST(CudaPipeline, ReplicasOfPipelinesTrainAsTheCpuTemplate) {
  REQUIRE_GPU();
  if (discover_devices().gpus.size() < 4) GTEST_SKIP() << "fewer than four GPUs";
  Side cpu(mlp(), kAdam, kLoss, json::array(), "cpu", Precision::fp32);
  Side piped(mlp(), kAdam, kLoss, gpus({0, 1, 2, 3}, "cuda:0,1,2,3"),
             json{{"stages", 2}, {"microbatches", 2}});
  expect_same_training(piped, cpu, 1e-3);
}

}  // namespace
}  // namespace tandem
