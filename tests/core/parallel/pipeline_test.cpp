// Pipelines (parallel/pipeline_layout.hpp, pipeline_replica.cpp): stage layouts and their
// errors, and contract 1 for a model trained in stages — 10 Adam steps through a pipeline equal
// template-only training to float rounding, whatever the stages, micro-batches, schedule and
// replicas.
#include "parallel/pipeline_layout.hpp"

#include <gtest/gtest.h>

#include <string>

#include "meta_test_models.hpp"
#include "parallel/call_probe.hpp"
#include "parallel/pipeline_scheduler.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using namespace meta_test;

PipelinePlan plan_of(const Model& model, const json& pipeline) {
  const PipelineConfig config = parse_pipeline_config(pipeline, "pipeline");
  return {cut_into_stages(model, config), config.microbatches, config.schedule};
}

std::vector<std::string> names_of(const Model& model, const std::vector<std::size_t>& layers) {
  std::vector<std::string> names;
  for (std::size_t l : layers) names.push_back(model.layer(l).name());
  return names;
}

// The message of the ConfigError `f` throws (fails the test when it throws none).
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return "";
}

TEST(PipelineLayout, CountedStagesBalanceTheParameters) {
  // Dense 6->12 (84 parameters), Dropout (0), Dense 12->5 (65): {84} | {0, 65} is the best cut.
  const auto model = Model::from_config(model_config(), "model", 1);
  const PipelinePlan plan = plan_of(*model, {{"stages", 2}});
  ASSERT_EQ(plan.stage_count(), 2);
  EXPECT_EQ(names_of(*model, plan.layout.layers[0]), (std::vector<std::string>{"dense"}));
  EXPECT_EQ(names_of(*model, plan.layout.layers[1]),
            (std::vector<std::string>{"dropout", "dense_1"}));
  EXPECT_EQ(plan.layout.parameters, (std::vector<std::int64_t>{84, 65}));
  EXPECT_EQ(plan.schedule, PipelineSchedule::one_f_one_b);
  // Balanced by measured time instead: still contiguous, every call once.
  const auto seconds = measure_call_seconds(*model, 8, 1);
  ASSERT_EQ(seconds.size(), model->call_count());
  const PipelineLayout timed =
      cut_into_stages(*model, parse_pipeline_config({{"stages", 3}}, "pipeline"), seconds);
  EXPECT_EQ(timed.calls, (std::vector<std::vector<std::size_t>>{{0}, {1}, {2}}));
}

TEST(PipelineLayout, NamedStagesFollowTheDataFlow) {
  const auto model = Model::from_config(residual_model_config(), "model", 1);
  // The side branch may sit in the first stage although it comes later in the graph's order.
  const PipelinePlan plan =
      plan_of(*model, {{"stages", {{"inner", "drop", "side"}, {"skip", "join", "logits"}}},
                       {"microbatches", 3}, {"schedule", "gpipe"}});
  EXPECT_EQ(names_of(*model, plan.layout.layers[0]),
            (std::vector<std::string>{"inner", "drop", "side"}));
  EXPECT_EQ(plan.microbatches, 3);
  EXPECT_EQ(plan.schedule, PipelineSchedule::gpipe);
  const auto cut = [&](const json& stages) {
    return config_error([&] { plan_of(*model, {{"stages", stages}}); });
  };
  {
    const std::string e = cut({{"inner", "drop"}, {"skip", "nope", "side", "join", "logits"}});
    EXPECT_NE(e.find("pipeline.stages[1][1]"), std::string::npos) << e;
    EXPECT_NE(e.find("no layer 'nope'"), std::string::npos) << e;
  }
  EXPECT_NE(cut({{"x", "inner", "drop", "side"}, {"skip", "join", "logits"}})
                .find("'pipeline.stages[0][0]': 'x' is an InputLayer of model 'residual': "
                      "stages name the layers that compute"),
            std::string::npos);
  EXPECT_NE(cut({{"inner", "drop", "side"}, {"skip", "join", "logits", "inner"}})
                .find("'pipeline.stages[1][3]': layer 'inner' is named twice (first at "
                      "pipeline.stages[0][0])"),
            std::string::npos);
  EXPECT_NE(cut({{"inner", "drop", "side"}, {"skip", "join"}}).find("names no stage for 'logits'"),
            std::string::npos);
  EXPECT_NE(cut({{"skip", "join", "logits", "side"}, {"inner", "drop"}})
                .find("layer 'skip' (stage 0) reads 'drop' of the later stage 1"),
            std::string::npos);
  const auto shared = Model::from_config(shared_model_config(), "model", 1);
  EXPECT_NE(config_error([&] { plan_of(*shared, {{"stages", 4}}); })
                .find("4 stages for model 'shared', which can be cut in at most 3"),
            std::string::npos);
}

TEST(PipelineLayout, ASharedLayerStaysInOneStage) {
  const auto model = Model::from_config(shared_model_config(), "model", 1);
  // Named stages place layers, so both calls go where the layer goes; counted stages never cut
  // between the calls.
  EXPECT_EQ(plan_of(*model, {{"stages", {{"twice"}, {"both", "logits"}}}}).layout.calls,
            (std::vector<std::vector<std::size_t>>{{0, 1}, {2, 3}}));
  const PipelinePlan plan = plan_of(*model, {{"stages", 3}});
  EXPECT_EQ(plan.layout.calls, (std::vector<std::vector<std::size_t>>{{0, 1}, {2}, {3}}));
}

TEST(PipelineConfig, EveryWrongSettingNamesItsPlace) {
  const auto error = [](const json& pipeline) {
    return config_error([&] { parse_pipeline_config(pipeline, "pipeline"); });
  };
  EXPECT_NE(error({{"stages", "two"}}).find("'pipeline.stages': expected a stage count"),
            std::string::npos);
  EXPECT_NE(error({{"stages", json::array()}}).find("pipeline.stages"), std::string::npos);
  EXPECT_NE(error({{"stages", {json::array()}}}).find("'pipeline.stages[0]': expected a non-empty"),
            std::string::npos);
  EXPECT_NE(error({{"stages", {{1}}}}).find("'pipeline.stages[0][0]': expected a layer name"),
            std::string::npos);
  EXPECT_NE(error({{"stages", 0}}).find("pipeline.stages"), std::string::npos);
  EXPECT_NE(error({{"microbatches", 0}}).find("pipeline.microbatches"), std::string::npos);
  EXPECT_NE(error({{"microbatches", 2.5}}).find("pipeline.microbatches"), std::string::npos);
  EXPECT_NE(error({{"schedule", "zigzag"}}).find("pipeline.schedule"), std::string::npos);
  EXPECT_NE(error({{"stages", {{"a"}}}, {"balance", "time"}}).find("pipeline.balance"),
            std::string::npos);
  EXPECT_NE(error({{"stages", 2}, {"stage", 2}}).find("pipeline.stage"), std::string::npos);
  EXPECT_NE(error(json::array()).find("pipeline"), std::string::npos);
  // And back: every key written, read again the same.
  const PipelineConfig config = parse_pipeline_config(
      {{"stages", 3}, {"microbatches", 5}, {"schedule", "gpipe"}, {"balance", "time"}}, "p");
  const PipelineConfig again = parse_pipeline_config(pipeline_config_json(config), "p");
  EXPECT_EQ(again.stages, 3);
  EXPECT_EQ(again.microbatches, 5);
  EXPECT_EQ(again.schedule, PipelineSchedule::gpipe);
  EXPECT_EQ(again.balance, PipelineBalance::time);
}

TEST(PipelineConfig, ThePlanMustHoldWholePipelines) {
  EXPECT_EQ(pipeline_replicas(DevicePlan::cpus(4), 2), 2);
  EXPECT_NE(config_error([] { pipeline_replicas(DevicePlan::cpus(3), 2); })
                .find("'pipeline.stages': 2 stages do not divide device plan 'cpu:3' (3 devices)"),
            std::string::npos);
  const DevicePlan gpus{
      {{DeviceKind::cuda, 0}, {DeviceKind::cuda, 1}, {DeviceKind::cuda, 2}, {DeviceKind::cuda, 3}},
      "cuda:0,1,2,3"};
  EXPECT_EQ(pipeline_replicas(gpus, 2), 2);  // two replicas of a pipeline over two GPUs
  EXPECT_NE(config_error([&] { pipeline_replicas(gpus, 3); })
                .find("3 stages do not divide device plan 'cuda:0,1,2,3' (4 devices)"),
            std::string::npos);
}

// x -> a; b = Dense(a); c = Dense(a); d = Dense(a); e = Add(b, c, d) -> out; and the 3-stage
// chain x -> p -> q -> r = Add(q, p) -> out2: what stages on separate GPUs can hand over.
json fan_model_config() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "fan", "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 3]},
       "inbound_nodes": []},
      {"class_name": "Dense", "name": "a", "config": {"name": "a", "units": 4},
       "inbound_nodes": [[["x", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "b", "config": {"name": "b", "units": 4},
       "inbound_nodes": [[["a", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "c", "config": {"name": "c", "units": 4},
       "inbound_nodes": [[["a", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "d", "config": {"name": "d", "units": 4},
       "inbound_nodes": [[["a", 0, 0, {}]]]},
      {"class_name": "Add", "name": "e", "config": {"name": "e"},
       "inbound_nodes": [[["b", 0, 0, {}], ["c", 0, 0, {}], ["d", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 2},
       "inbound_nodes": [[["e", 0, 0, {}]]]}],
      "input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]}})");
}

TEST(PipelineLayout, DeviceStagesHandOverOnlyToTheNextStage) {
  const auto fan = Model::from_config(fan_model_config(), "model", 1);
  const auto layout = [&](const Model& m, const json& stages) {
    return plan_of(m, {{"stages", stages}}).layout;
  };
  const auto refused = [&](const Model& m, const json& stages) {
    return config_error([&] { require_device_hand_offs(m, layout(m, stages), "cuda:0,1,2"); });
  };
  // a is read by b, c, d of stage 1: one copy of a over the boundary, its gradient summed there.
  const PipelineLayout fanned = layout(*fan, {{"a"}, {"b", "c", "d", "e", "out"}});
  EXPECT_EQ(stage_hand_offs(*fan, fanned), (std::vector<std::vector<std::size_t>>{{0}}));
  EXPECT_NO_THROW(require_device_hand_offs(*fan, fanned, "cuda:0,1"));
  // Three stages: b and a cross the first boundary, e the second.
  const PipelineLayout three = layout(*fan, {{"a", "b"}, {"c", "d", "e"}, {"out"}});
  EXPECT_EQ(stage_hand_offs(*fan, three), (std::vector<std::vector<std::size_t>>{{0, 1}, {4}}));
  // ...but a is read by b in its own stage and by c and d in the next: summed on two GPUs.
  EXPECT_NE(refused(*fan, {{"a", "b"}, {"c", "d", "e"}, {"out"}})
                .find("'pipeline.stages': 'a' (stage 0) is read by 2 layers of the next stage "
                      "and by its own: its gradient would be summed on two GPUs on plan "
                      "'cuda:0,1,2'"),
            std::string::npos);
  // e (stage 2) reads b (stage 0) two stages back.
  const std::string back = refused(  // (each pair spelled out: not a JSON object)
      *fan, json::array({json::array({"a", "b"}), json::array({"c", "d"}),
                         json::array({"e", "out"})}));
  EXPECT_NE(back.find("layer 'e' (stage 2) reads 'b' of stage 0"), std::string::npos) << back;
  // A later stage reads the model's input.
  const auto residual = Model::from_config(residual_model_config(), "model", 1);
  EXPECT_NE(refused(*residual, {{"inner", "drop"}, {"skip", "side", "join", "logits"}})
                .find("layer 'skip' (stage 1) reads a model input on plan 'cuda:0,1,2': stages "
                      "on separate devices hand tensors only to the next stage; move the cut"),
            std::string::npos);
  EXPECT_EQ(stage_hand_offs(*residual, layout(*residual, {{"inner", "drop", "skip", "side"},
                                                          {"join", "logits"}})),
            (std::vector<std::vector<std::size_t>>{{2, 3}}));
}

// The schedules' order, written out: "F2" is micro-batch 2's forward, "B2" its backward.
std::string order_of(PipelineSchedule schedule, int s, int S, int M) {
  std::string order;
  for (const auto& op : detail::stage_operations(schedule, s, S, M))
    order += (order.empty() ? "" : " ") + std::string(op.forward ? "F" : "B") +
             std::to_string(op.microbatch);
  return order;
}

TEST(PipelineSchedule, OneFOneBWarmsUpThenAlternatesAndGpipeRunsAllForwardsFirst) {
  EXPECT_EQ(order_of(PipelineSchedule::one_f_one_b, 0, 3, 4), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(order_of(PipelineSchedule::one_f_one_b, 1, 3, 4), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(order_of(PipelineSchedule::one_f_one_b, 2, 3, 4), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(order_of(PipelineSchedule::one_f_one_b, 0, 4, 2), "F0 F1 B0 B1");  // M < S
  EXPECT_EQ(order_of(PipelineSchedule::gpipe, 1, 3, 3), "F0 F1 F2 B0 B1 B2");
  // Micro-batches in flight, each with its own activations: M for GPipe, min(M, S) for 1F1B.
  EXPECT_EQ(detail::pipeline_slots(PipelineSchedule::gpipe, 2, 5), 5);
  EXPECT_EQ(detail::pipeline_slots(PipelineSchedule::one_f_one_b, 2, 5), 2);
  EXPECT_EQ(detail::pipeline_slots(PipelineSchedule::one_f_one_b, 4, 3), 3);
}

// 10 Adam steps of `config` through pipelines on `devices` CPU workers, against the template
// trained alone; returns the pipelined template.
std::unique_ptr<Model> train_pipelined(const json& config, int devices, const json& pipeline,
                                       std::int64_t batch) {
  Fixture alone(config), piped(config);
  train_template_alone(alone, batch, 10);
  {
    ReplicaModel meta(*piped.model, *piped.opt, DevicePlan::cpus(devices), single_process_world(),
                      Precision::fp32, plan_of(*piped.model, pipeline));
    train_meta(piped, meta, batch, 10);
    const auto& stages = meta.last_step().front().stages;
    EXPECT_EQ(static_cast<int>(stages.size()), meta.pipeline()->stage_count());
    for (const StageStep& s : stages) EXPECT_GT(s.seconds, 0.0);
    const double bubble = meta.last_step().front().bubble();
    EXPECT_GE(bubble, 0.0);
    EXPECT_LT(bubble, 1.0);
  }
  EXPECT_LE(max_relative_difference(*piped.model, *alone.model), 1e-5)
      << devices << " devices, pipeline " << pipeline.dump() << ", batch " << batch;
  const Batch probe = make_batch(9, 999);
  const Tensor expected = alone.model->forward(probe.x, false).clone();
  const Tensor& got = piped.model->forward(probe.x, false);
  for (std::int64_t k = 0; k < expected.size(); ++k)
    EXPECT_NEAR(got[k], expected[k], 1e-5 * std::max(1.0f, std::fabs(expected[k])))
        << pipeline.dump() << ", output " << k;
  Fixture untouched(config);
  EXPECT_GT(max_relative_difference(*untouched.model, *alone.model), 1e-3);
  return std::move(piped.model);
}

TEST(PipelineEqualsTemplate, SequentialInTwoAndThreeStagesAnyMicrobatchCount) {
  for (int stages : {2, 3})
    for (int microbatches : {1, 2, 3, 4})
      train_pipelined(model_config(), stages,
                      {{"stages", stages}, {"microbatches", microbatches}}, 13);
}

TEST(PipelineEqualsTemplate, GraphsWithReplicasOfPipelines) {
  // A residual graph cut by name, a shared layer, a transformer block (attention with dropout):
  // two replicas of a two-stage pipeline, and one three-stage pipeline, each with 4 micro-batches.
  train_pipelined(residual_model_config(), 4,
                  {{"stages", {{"inner", "drop", "side"}, {"skip", "join", "logits"}}},
                   {"microbatches", 4}},
                  130);
  train_pipelined(shared_model_config(), 3, {{"stages", 3}, {"microbatches", 4}}, 7);
  train_pipelined(attention_model_config(), 4, {{"stages", 2}, {"microbatches", 4}}, 130);
}

TEST(PipelineEqualsTemplate, GpipeAndOneFOneBGiveTheSameBits) {
  const json base = {{"stages", 3}, {"microbatches", 5}};
  json gpipe = base;
  gpipe["schedule"] = "gpipe";
  const auto a = train_pipelined(residual_model_config(), 3, gpipe, 29);
  const auto b = train_pipelined(residual_model_config(), 3, base, 29);
  const auto c = train_pipelined(residual_model_config(), 3, base, 29);
  EXPECT_TRUE(bitwise_equal(*a, *b));
  EXPECT_TRUE(bitwise_equal(*b, *c));
}

// Two replicas of a two-stage pipeline with synchronized BatchNormalization, trained 5 steps.
std::unique_ptr<Model> train_batch_norm_pipelines(int microbatches) {
  Fixture piped;
  piped.model = Model::from_config(batch_norm_model(true), "model", 23);
  {
    ReplicaModel meta(*piped.model, *piped.opt, DevicePlan::cpus(4), single_process_world(),
                      Precision::fp32,
                      plan_of(*piped.model, {{"stages", 2}, {"microbatches", microbatches}}));
    train_meta(piped, meta, 16, 5);
  }
  return std::move(piped.model);
}

TEST(PipelineEqualsTemplate, SynchronizedBatchNormSumsOverThePipelinesStageByStage) {
  // One micro-batch each: the statistics span the global batch, as the template's do.
  Fixture alone;
  alone.model = Model::from_config(batch_norm_model(true), "model", 23);
  train_template_alone(alone, 16, 5);
  EXPECT_LT(max_relative_difference(*train_batch_norm_pipelines(1), *alone.model), 1e-5);
  // Three micro-batches: each is normalised over the same micro-batch of both replicas
  // (documented), so the weights differ from the template's; the same bits run to run.
  const auto a = train_batch_norm_pipelines(3), b = train_batch_norm_pipelines(3);
  EXPECT_GT(max_relative_difference(*a, *alone.model), 1e-4);
  EXPECT_TRUE(bitwise_equal(*a, *b));
}

// A step moves BatchNormalization's moving statistics once, as data parallelism with one replica
// per micro-batch does: the same bits, the moving statistics included (shared with the host,
// every micro-batch moved them: 0.089 apart after a few steps).
TEST(PipelineEqualsTemplate, MovingStatisticsMoveOncePerStepAsWithAReplicaPerMicroBatch) {
  Fixture piped, parallel;
  piped.model = Model::from_config(batch_norm_model(false), "model", 23);
  parallel.model = Model::from_config(batch_norm_model(false), "model", 23);
  {
    ReplicaModel meta(*piped.model, *piped.opt, DevicePlan::cpus(2), single_process_world(),
                      Precision::fp32, plan_of(*piped.model, {{"stages", 2}, {"microbatches", 4}}));
    train_meta(piped, meta, 16, 5);
  }
  {
    ReplicaModel meta(*parallel.model, *parallel.opt, DevicePlan::cpus(4));
    train_meta(parallel, meta, 16, 5);
  }
  EXPECT_TRUE(bitwise_equal(*piped.model, *parallel.model))
      << max_relative_difference(*piped.model, *parallel.model);
}

// Synchronized statistics over a micro-batch that no replica holds rows of (a short batch's end)
// move nothing (they were 0 / 0: NaN moving statistics, and every val_loss null).
TEST(PipelineReplica, AMicroBatchWithoutRowsAnywhereMovesNoStatistics) {
  Fixture s(batch_norm_model(true));
  s.model = Model::from_config(batch_norm_model(true), "model", 23);
  {
    ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(4), single_process_world(),
                      Precision::fp32, plan_of(*s.model, {{"stages", 2}, {"microbatches", 2}}));
    train_meta(s, meta, 1, 2);  // one row: replica 1 holds none, micro-batch 1 is empty
  }
  for (Parameter* p : s.model->parameters())
    for (std::int64_t k = 0; k < p->value.size(); ++k)
      ASSERT_TRUE(std::isfinite(p->value[k])) << p->name << " " << k;
}

// An output carrying a Keras mask divides its loss by the whole batch's kept steps, which a
// pipeline's micro-batches cannot know: refused at "pipeline", nothing trained.
TEST(PipelineReplica, AMaskedOutputIsRefused) {
  const json tagger = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {{{"class_name", "Embedding"},
           {"config",
            {{"input_dim", 9}, {"output_dim", 4}, {"mask_zero", true}, {"input_shape", {5}}}}},
          {{"class_name", "Dense"}, {"config", {{"units", 3}}}}}}}}};
  Fixture s(tagger);
  ASSERT_TRUE(s.model->output_masked(0));
  const std::string e = config_error([&] {
    ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(2), single_process_world(),
                      Precision::fp32, plan_of(*s.model, {{"stages", 2}}));
  });
  EXPECT_NE(e.find("'pipeline': the model's outputs carry Keras masks"), std::string::npos) << e;
}

TEST(PipelineReplica, AnErrorInAStageSurfacesAndThePipelineStaysUsable) {
  Fixture s;
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(2), single_process_world(),
                    Precision::fp32, plan_of(*s.model, {{"stages", 2}, {"microbatches", 3}}));
  Batch bad = make_batch(9, 1);
  bad.y[8] = 7;  // not a class index: the last micro-batch fails in the last stage
  EXPECT_THROW(meta.forward_backward(bad, *s.loss, s.metrics), DataError);
  EXPECT_NO_THROW(train_meta(s, meta, 9, 2));
}

// Pipelines with synchronized statistics meet stage by stage: a stage that fails in one pipeline
// must release the other pipeline's stages waiting for it (they used to wait forever), and the
// failed stage's own error surfaces.
TEST(PipelineReplica, AFailedStageReleasesTheOtherPipelinesFromSynchronizedStatistics) {
  Fixture s(batch_norm_model(true));
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(4), single_process_world(), Precision::fp32,
                    plan_of(*s.model, {{"stages", 2}, {"microbatches", 2}}));
  for (const std::int64_t bad_row : {15, 0}) {  // the second pipeline's rows, then the first's
    Batch bad = make_batch(16, 1);
    bad.y[bad_row] = 7;  // not a class index: the last stage fails in its loss
    EXPECT_THROW(meta.forward_backward(bad, *s.loss, s.metrics), DataError) << "row " << bad_row;
  }
  EXPECT_NO_THROW(train_meta(s, meta, 16, 2));
}

TEST(PipelineReplica, LoadedWeightsReachEveryMicrobatch) {
  // Weights loaded into the template (new tensors) after the pipeline was made: the next step
  // trains them, as the template alone does.
  Fixture piped, alone, source;
  train_template_alone(source, 11, 3);
  ReplicaModel meta(*piped.model, *piped.opt, DevicePlan::cpus(2), single_process_world(),
                    Precision::fp32, plan_of(*piped.model, {{"stages", 2}, {"microbatches", 2}}));
  for (Parameter* p : piped.model->parameters()) p->value = p->value.clone();
  piped.model->copy_weights_from(*source.model);
  meta.broadcast_from_template();
  alone.model->copy_weights_from(*source.model);
  train_meta(piped, meta, 11, 1);
  train_template_alone(alone, 11, 1);
  EXPECT_LE(max_relative_difference(*piped.model, *alone.model), 1e-5);
}

}  // namespace
}  // namespace tandem
