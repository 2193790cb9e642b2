// TrainingState: where a fit() is — plain data, read by callbacks and saved in checkpoints.
// Owned by the trainer; a callback reads it through its context during a hook (training thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/export.hpp"
#include "tandem/logs.hpp"

namespace tandem {

struct TANDEM_EXPORT TrainingState {
  int epoch = 0;           // current epoch, 0-based (Keras passes it so to callbacks)
  int epochs = 0;          // total epochs requested
  std::int64_t batch = 0;  // batches done in the current epoch
  std::int64_t steps_per_epoch = 0;
  std::int64_t step = 0;      // optimizer steps done since the run began
  std::vector<Logs> history;  // one entry per finished epoch (train + val_ metrics)
  bool stop_requested = false;
  std::string stop_reason;
};

}  // namespace tandem
