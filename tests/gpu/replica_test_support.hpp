// Helpers of the GPU tests that train through the public ReplicaModel (cuda_replica_test.cpp,
// cuda_pipeline_test.cpp): a model, optimizer and loss on a device plan, seeded batches, and
// how far two models' weights are apart.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_test_support.hpp"
#include "parallel/pipeline_layout.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/model.hpp"

namespace tandem::replica_test {

using gpu_test::plan;
using nlohmann::json;

inline json loss_spec(const std::string& cls, json config = json::object()) {
  return {{"class_name", cls}, {"config", config}};
}

// One side of a comparison: a model built from `config` with seed 7, its optimizer and loss.
struct Side {
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Loss> loss;
  std::vector<std::unique_ptr<Metric>> metrics;
  std::unique_ptr<ReplicaModel> meta;

  Side(const json& model_config, const json& optimizer_config, const json& loss_config,
       const json& metrics_config, const std::string& devices, Precision precision) {
    model = Model::from_config(model_config, "model", 7);
    optimizer = make_optimizer(optimizer_config, "optimizer");
    loss = make_loss(loss_config, "loss");
    metrics = make_metrics(metrics_config, "metrics", *loss, model->output_shape());
    meta = std::make_unique<ReplicaModel>(*model, *optimizer, plan(devices), single_process_world(),
                                          precision);
  }
  /// fp32 on an explicit plan (a pipeline's stages may share a GPU, which a user's plan cannot
  /// say), trained as the run config's `pipeline` section says.
  Side(const json& model_config, const json& optimizer_config, const json& loss_config,
       const DevicePlan& devices, const json& pipeline) {
    model = Model::from_config(model_config, "model", 7);
    optimizer = make_optimizer(optimizer_config, "optimizer");
    loss = make_loss(loss_config, "loss");
    const PipelineConfig config = parse_pipeline_config(pipeline, "pipeline");
    meta = std::make_unique<ReplicaModel>(
        *model, *optimizer, devices, single_process_world(), Precision::fp32,
        PipelinePlan{cut_into_stages(*model, config), config.microbatches, config.schedule});
  }
};

// Inputs uniform in [-1, 1) (or integers in [0, vocabulary) for Embedding), targets for `loss`.
enum class Targets { sparse, one_hot, binary, real };

inline Batch make_batch(const Shape& input, const Shape& output, std::int64_t n, Targets targets,
                        std::uint64_t seed, std::int64_t vocabulary = 0) {
  Batch b;
  Shape xs{n};
  xs.insert(xs.end(), input.begin(), input.end());
  b.x = Tensor(xs);
  Rng rng(seed);
  for (std::int64_t i = 0; i < b.x.size(); ++i)
    b.x[i] = vocabulary > 0 ? static_cast<float>(rng.below(static_cast<std::uint64_t>(vocabulary)))
                            : rng.uniform() * 2 - 1;
  const std::int64_t classes = shape_size(output);
  if (targets == Targets::sparse) {
    b.y = Tensor({n});
    for (std::int64_t i = 0; i < n; ++i)
      b.y[i] = static_cast<float>(rng.below(static_cast<std::uint64_t>(classes)));
  } else {
    b.y = Tensor({n, classes});
    for (std::int64_t i = 0; i < n; ++i) {
      const auto hot = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
      for (std::int64_t c = 0; c < classes; ++c)
        b.y[i * classes + c] = targets == Targets::one_hot  ? (c == hot ? 1.0f : 0.0f)
                               : targets == Targets::binary ? static_cast<float>(rng.below(2))
                                                            : rng.uniform() * 2 - 1;
    }
  }
  return b;
}

// max |a - b| over max |b| (with a floor), per tensor, worst over the model's parameters.
inline double worst_relative_difference(Model& a, Model& b, std::string* where) {
  auto pa = a.parameters(), pb = b.parameters();
  auto names = a.parameter_names();
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    double diff = 0, scale = 1e-6;
    for (std::int64_t k = 0; k < pa[i]->value.size(); ++k) {
      diff = std::max(diff, std::fabs(static_cast<double>(pa[i]->value[k]) - pb[i]->value[k]));
      scale = std::max(scale, std::fabs(static_cast<double>(pb[i]->value[k])));
    }
    if (diff / scale > worst) {
      worst = diff / scale;
      if (where) *where = names[i];
    }
  }
  return worst;
}

inline double relative(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(b), 1e-6);
}

}  // namespace tandem::replica_test
