// process_world() in a build without MPI.
#include "tandem/error.hpp"
#include "parallel/world.hpp"

namespace tandem {

std::shared_ptr<World> process_world() {
  if (launched_by_mpi())
    throw RunError(
        "this process was started by an MPI launcher (mpirun), but this Tandem was built without "
        "MPI; rebuild with -DTANDEM_WITH_MPI=ON (Debian: apt install libopenmpi-dev), or run "
        "`tandem train` directly");
  return single_process_world();
}

}  // namespace tandem
