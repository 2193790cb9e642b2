// Snapshot: how a checkpoint taken from a live model holds the model's tensors.
#pragma once

namespace tandem {

/// `copy`: its own copies, a snapshot that outlives the model's next change (what a checkpoint
/// kept or written in the background needs). `shared`: the model's own storage (Tensor copies
/// share it), valid only until the model's weights or optimizer slots next change — for a
/// checkpoint written at once, without a second copy of the model in memory.
enum class Snapshot { copy, shared };

}  // namespace tandem
