// Objective: what a training step minimizes and reports for a model — per output, a loss, its
// weight and metrics — computed on whichever backend the model's outputs live on, as sums over
// the batch's rows.
//
// The loss of a step is the weighted sum of the outputs' losses (Keras' loss_weights). With
// several outputs each output's own loss is reported too, as "<output>_loss", and its metrics as
// "<output>_<metric>" (Keras 2's names: dense_1_loss, dense_1_accuracy); with one output the
// names are the metrics' own. Targets come packed as the model's outputs do (tandem/model.hpp):
// a sample's y holds each output's targets in output order, flattened (one class index for a
// sparse loss, else as many values as the output has), then, for weighted data (Dataset's
// weight_count()), the sample's weight (Keras' sample_weight) — or, for a model of one output
// whose values have positions (a sequence's steps, an image's pixels: nn/loss.hpp's
// positions_of), one weight per position (Keras' temporal weights), in position order.
//
// Weights, as Keras applies them: the loss is the sum over samples of weight × loss divided by
// the number of samples (not the weights' sum); "weighted_metrics" are weighted means (sums of
// weight × value over the sum of the weights; a ratio metric weighs both of its sums); plain
// "metrics" ignore the weights. A weighted metric named as a plain one of the same output is
// logged as "weighted_<name>" (Keras 2's rule). Weights by position weigh each position's loss
// and metric values alike: the loss is the sum of weight × loss over every position divided by
// their number (samples × positions), a weighted metric the sum of weight × value over the
// weights' sum.
//
// Masks (Model::output_masked): an output carrying a Keras mask of its steps weighs each step's
// loss by the mask (and the sample's weight), and the loss is that sum divided by the number of
// kept steps in the batch — Keras' apply_mask, which weighs the kept steps by total / valid —
// so every replica counts the global batch's kept steps before it computes a gradient (one sum
// across the replicas: Model::mask_count_sum). Its metrics are means over the kept steps (times
// the samples' weights, for weighted_metrics), as Keras' metrics take the mask as their weights.
// A loss that ignores a class (SparseCategoricalCrossentropy's ignore_class) keeps the steps
// whose label is another class, and is divided by their number alike (Keras sets that mask on
// its losses); the metrics do not see it, as in Keras.
//
// Ownership: an Objective owns its losses and metrics, or borrows them (borrowing(): they must
// outlive it). Immutable once made, so replicas on several threads share one; the tensors of a
// step live in an ObjectiveScratch each replica owns (and keeps: a device replica's captured
// step graphs point into them).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/loss.hpp"
#include "nn/metric.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class Model;

namespace backend {
class Backend;
class Sums;
}  // namespace backend

/// Loss and metric sums over a batch (means are sum / count): the metrics' parts in
/// metric_names() order (one each, or a histogram metric's bins; Objective::values reads them).
struct StepSums {
  MetricSum loss;
  std::vector<MetricSum> metrics;
  /// Adds another part's sums (the same metrics, in order).
  void add(const StepSums& other) {
    loss.add(other.loss);
    for (std::size_t m = 0; m < metrics.size(); ++m) metrics[m].add(other.metrics[m]);
  }
};

/// One replica's working tensors for an Objective (see above). Used by one thread at a time.
struct ObjectiveScratch {
  std::vector<Tensor> targets;  // per output, its targets apart (several outputs, or weighted)
  Tensor weights;               // the samples' weights, apart (weighted data; rows x positions
                                // for weights by position)
  Tensor weighted_mask;         // weights by position times the output's mask (weighted metrics)
  std::vector<Tensor> step_weights;  // per output that weighs steps, its loss's weight of each
  std::vector<Tensor> grads;    // per output, the loss gradient
  std::vector<const Tensor*> grad_views;
};

/// How a label check names a sample of its data: "sample 7 of npy: ...".
using SamplePlace = std::function<std::string(std::int64_t sample)>;

/// One output's targets as the label checks see them (Objective::label_check).
struct LabelColumn {
  std::string output;          // its name
  std::string loss;            // its loss's name
  bool sparse = false;         // one class index per position
  std::int64_t width = 0;      // the output's values per sample
  std::int64_t classes = 0;    // its last axis: the classes, when sparse
  std::int64_t positions = 1;  // positions_of its per-sample shape (nn/loss.hpp)
  std::optional<float> ignored;  // the class its loss ignores: any value goes there
};

class Objective {
 public:
  struct Output {
    std::string name;  // the output layer's name ("" for a borrowing() objective)
    const Loss* loss = nullptr;
    double weight = 1.0;
    bool masked = false;  // the output carries a Keras mask (Model::output_masked)
    std::vector<const Metric*> metrics;
    std::vector<const Metric*> weighted_metrics;
  };

  /// One output (`masked`: it carries a Keras mask, Model::output_masked(0)); `loss` and
  /// `metrics` stay the caller's and must outlive the objective.
  static Objective borrowing(const Loss& loss, const std::vector<std::unique_ptr<Metric>>& metrics,
                             bool masked = false);
  /// `outputs` point into `losses` and `metrics`, which the objective keeps.
  Objective(std::vector<Output> outputs, std::vector<std::unique_ptr<Loss>> losses,
            std::vector<std::unique_ptr<Metric>> metrics);
  Objective(Objective&&) noexcept = default;
  Objective& operator=(Objective&&) noexcept = default;

  std::size_t output_count() const { return outputs_.size(); }
  const Output& output(std::size_t j) const { return outputs_[j]; }
  /// The loss of output 0 (the loss, for a model with one output).
  const Loss& loss() const { return *outputs_[0].loss; }
  /// The keys of the metrics in logs (see above).
  std::vector<std::string> metric_names() const;
  /// How many parts StepSums::metrics holds (metric_names().size() without histogram metrics).
  std::size_t part_count() const;
  /// The metrics' values, in metric_names() order, from their parts (summed over any batches).
  std::vector<double> values(const std::vector<MetricSum>& parts) const;

  /// Throws ShapeError naming the output when targets of per-sample shape `targets` (one shape,
  /// packed; or one per output), with `weights` sample weights each (Dataset::weight_count),
  /// cannot go with the model's outputs.
  void check_targets(const Model& model, const std::vector<Shape>& targets,
                     std::int64_t weights = 0) const;
  /// Throws DataError for a sparse label that is no class index, in host targets `y` (weighted
  /// or not) of `model`'s outputs, naming the output, the batch's row and the label's position
  /// (a device replica checks before it copies).
  void check_labels(const Tensor& y, const Model& model) const;
  /// The same check for a data loader (DataLoaderOptions::check_targets), naming a sample as
  /// `place` does (Dataset::sample_place). Holds copies of what it needs: it may outlive this
  /// and the model.
  std::function<void(const Tensor& y, std::span<const std::int64_t> samples)> label_check(
      const Model& model, SamplePlace place) const;

  /// Queues on `ops` the sums of one batch: `outputs` as `model`'s forward_outputs gave them
  /// and packed targets `y`, both in ops' memory; y's rows hold one value more than the targets
  /// when the data is weighted (its last: the sample's weight). With `gradients`,
  /// scratch.grad_views[j] is then grad_scale * weight_j * d(loss_j sum)/d(output j). `sums` is
  /// reset. A masked output's mask is read from `model` and its kept steps counted across the
  /// replicas (model.mask_count_sum(): every replica calls, an empty shard too). Throws
  /// ShapeError when y fits the outputs neither way.
  void enqueue(backend::Backend& ops, const Model& model, const std::vector<const Tensor*>& outputs,
               const Tensor& y, float grad_scale, bool gradients, ObjectiveScratch& scratch,
               backend::Sums& sums) const;
  /// What enqueue() does across the replicas, for a replica without rows that computes nothing
  /// (a device replica's empty shard): its part, zero, of the kept steps' count.
  void count_without_rows(const Model& model) const;
  /// Throws ConfigError at `path` when an output's loss is divided by the kept steps of the
  /// whole batch (a Keras mask on the output, or a loss that ignores a class), which a part of
  /// the batch computed apart (a pipeline's micro-batch) cannot know.
  void require_whole_batches(const std::string& path) const;
  /// The sums enqueue() queued (on a device: waits for them), over `rows` samples.
  StepSums read(backend::Sums& sums, std::int64_t rows) const;
  /// StepSums with every sum zero (a replica without rows).
  StepSums zero() const;

 private:
  Objective() = default;
  struct OrderedMetric {
    const Metric* metric;
    bool weighted;
    std::size_t output;
  };
  std::size_t slot_count() const;
  /// The first slot of the masked outputs' counts of kept steps (then, per masked output, the
  /// plain count and, with weighted metrics, the weighted one).
  std::size_t mask_slots() const;
  std::vector<LabelColumn> label_columns(const Model& model) const;
  /// Throws ShapeError unless `weights` (> 1) weights per sample are one per position of the
  /// model's one output.
  void check_position_weights(const Model& model, std::int64_t weights) const;
  bool has_weighted_metrics() const;
  std::size_t masked_count() const;
  /// Every metric in metric_names() order after the per-output losses, with whether it is
  /// weighted and its output.
  std::vector<OrderedMetric> metrics_in_order() const;
  /// Whether output j's loss weighs its steps (kept ones over the batch's count): a masked output,
  /// or a loss that ignores a class (Keras' ignore_class); how many outputs do.
  bool weighs_steps(std::size_t j) const;
  std::size_t weighed_count() const;
  /// The kept steps over the global batch: the loss's weight of each step of each output that
  /// weighs_steps (scratch.step_weights[j]: its kept steps times the batch's steps over its kept
  /// ones), `targets` each output's apart.
  void weigh_kept_steps(backend::Backend& ops, const Model& model,
                        const std::vector<const Tensor*>& outputs,
                        const std::vector<const Tensor*>& targets, ObjectiveScratch& scratch) const;
  std::vector<Output> outputs_;
  std::vector<std::unique_ptr<Loss>> losses_;
  std::vector<std::unique_ptr<Metric>> metrics_;
};

/// The objective of a run config for `model`: `loss` is one loss for every output, a list in
/// output order, or an object by output name; `loss_weights` null, a list or an object; `metrics`
/// and `weighted_metrics` a list for every output, or an object (or a list of lists) by output.
/// Throws ConfigError at "loss", "loss_weights", "metrics" or "weighted_metrics".
Objective make_objective(const nlohmann::json& loss, const nlohmann::json& loss_weights,
                         const nlohmann::json& metrics, const Model& model,
                         const nlohmann::json& weighted_metrics = nlohmann::json());

}  // namespace tandem

TANDEM_INTERNAL_API_END
