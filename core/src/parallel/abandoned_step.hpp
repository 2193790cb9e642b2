// Private (parallel): the error of a replica that stopped waiting for another one.
//
// The replicas of a step meet where they sum across one another: synchronized
// BatchNormalization's statistics (CrossReplicaSum) and, on GPUs, the gradient buckets (NCCL). A
// replica that fails before such a meeting never arrives, so the others would wait for it
// forever. The worker that caught the failure has the meta-model abandon the step: every meeting
// releases its waiters, which throw AbandonedStep. It is a consequence, never a cause: the
// meta-model reports the failed replica's own error.
#pragma once

#include <exception>
#include <string>

#include "tandem/error.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class AbandonedStep : public RunError {
 public:
  explicit AbandonedStep(const std::string& what) : RunError(what) {}
};

/// True when `error` holds an AbandonedStep.
inline bool is_abandoned_step(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const AbandonedStep&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace tandem

TANDEM_INTERNAL_API_END
