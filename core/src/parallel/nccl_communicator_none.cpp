// Built when NCCL is not: there is no NCCL communicator.
#include "tandem/communicator.hpp"

namespace tandem {

std::unique_ptr<Communicator> make_nccl_communicator(const DevicePlan&, World&) {
  return nullptr;
}

}  // namespace tandem
