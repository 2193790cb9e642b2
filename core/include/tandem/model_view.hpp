// ModelView: the model a callback acts on — its *target* (docs/design.md contract 3).
//
// "template": the device-agnostic model (weights, config, save/load); its checkpoints load on any
// device plan. "meta": the same weights seen through the meta-model, plus the device plan and
// per-replica facts; its checkpoints record the plan and load only on the same plan.
// Views are owned by the trainer and valid during a hook call; use them from the training thread.
#pragma once

#include <string>
#include <vector>

#include "tandem/export.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/device_plan.hpp"
#include "tandem/model.hpp"

namespace tandem {

enum class Target { template_model, meta };
TANDEM_EXPORT std::string target_name(Target target);  // "template", "meta"

/// One pipeline stage of a replica (docs/pipeline.md): the device computing it, its layers.
struct TANDEM_EXPORT StageFacts {
  std::string device;               // "cpu", "cuda:1"
  int device_index = 0;             // the CPU worker's number, or the CUDA ordinal
  std::vector<std::string> layers;  // the template's layers it computes, in order
  std::int64_t parameters = 0;
  double step_seconds = 0;  // time it computed in the last step (the rest it waited)
};

struct TANDEM_EXPORT ReplicaFacts {
  int replica = 0;           // numbered across every rank of the run, in rank order
  std::string device;        // "cpu", "cuda:1" (a pipeline's: its first stage's)
  std::int64_t samples = 0;  // rows of the last batch this replica held
  double step_seconds = 0;   // its forward + backward time in the last step
  int rank = 0;              // the process (MPI rank) it runs in
  /// A pipeline's stages, in order (the run's own rank only); empty when one device holds the
  /// whole replica.
  std::vector<StageFacts> stages;
};

class TANDEM_EXPORT ModelView {
 public:
  virtual ~ModelView() = default;
  virtual Target target() const = 0;
  /// The template model, current (its weights equal every replica's).
  virtual Model& model() = 0;
  /// The device plan (the template view reports it too, for information).
  virtual const DevicePlan& plan() const = 0;
  /// Per-replica facts of the last step; empty for the template view.
  virtual std::vector<ReplicaFacts> replicas() const = 0;
  /// A checkpoint of this target: weights (Keras layout) plus, when `with_training_state`, the
  /// optimizer slots, RNG states, epoch/step and history needed to resume exactly.
  virtual CheckpointData checkpoint(bool with_training_state) = 0;
  /// Loads weights into this target (every replica). Throws DataError when they do not fit.
  virtual void load_weights(const CheckpointData& data, const std::string& source) = 0;
};

}  // namespace tandem
