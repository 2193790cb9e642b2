// Private (parallel): the moving state of a pipelined model's layers (BatchNormalization's moving
// statistics), moved once a step as data parallelism moves it with one replica per micro-batch.
// Shared by the CPU pipeline replica (pipeline_replica.cpp) and the CUDA module's
// (cuda/replica/cuda_pipeline_replica.cpp); docs/pipeline.md.
//
// Every slot (the model copy a micro-batch runs in) holds its own copy of the state. Before a
// micro-batch's training forward its stage resets the slot's copy to the step's starting values
// (the owner's), the forward moves it by the micro-batch's rows, and the stage adds the result,
// weighted by those rows, to the step's sums (in double, in micro-batch order). After the step
// the owner takes the sums' average, averaged in turn over the replicas of the run (the layer's
// CrossReplicaStatistics), so that the momentum applies once a step: the same bits as a replica
// per micro-batch (moving the owner's values once per micro-batch applied it M times).
//
// Values may live on a device: they are read and written through the slot layer's backend
// (ops()), so a device slot's add() waits for its stage's stream.
//
// Ownership: borrows the owner model's parameters, which must outlive it. Thread-safety: the
// states of stage s are reset and added to by stage s's worker only; start() and finish() are
// called between schedules by the replica's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/pipeline_layout.hpp"
#include "tandem/model.hpp"
#include "tandem/parameter.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

class PipelineMovingState {
 public:
  /// One per layer of `owner` that has a moving state, in layer order (stage by stage).
  static std::vector<PipelineMovingState> of(Model& owner, const PipelineLayout& layout);

  std::size_t layer() const { return layer_; }
  int stage() const { return stage_; }
  /// Whether `p` (a parameter of the owner) is part of this state.
  bool holds(const Parameter* p) const;

  /// A new step: the sums start at zero.
  void start();
  /// Before a micro-batch's forward (or an inference): `slot`'s copy takes the owner's values.
  void reset(Model& slot) const;
  /// After a micro-batch's training forward of `rows` rows in `slot`: its values into the sums.
  void add(Model& slot, std::int64_t rows);
  /// After the step: the owner's values become the sums' average (unchanged when no micro-batch
  /// had rows), averaged over the replicas through `slot`'s layer, whose copy then holds them
  /// too. `replica_rows`: this replica's rows. Every replica calls it, rows or not (a collective).
  void finish(Model& slot, std::int64_t replica_rows);

 private:
  PipelineMovingState(std::size_t layer, int stage, std::vector<Parameter*> owner);
  std::vector<Parameter*> state_of(Model& model) const;

  std::size_t layer_ = 0;
  int stage_ = 0;
  std::vector<Parameter*> owner_;          // the owner model's (borrowed)
  std::vector<std::vector<double>> sums_;  // per parameter, the row-weighted values of the step
  double rows_ = 0;
};

/// Whether `p` (a parameter of the owner) is part of any of `states`.
bool is_moving_state(const std::vector<PipelineMovingState>& states, const Parameter* p);

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
