#include "io/hdf5_lock.hpp"

#include <hdf5.h>

namespace tandem {

std::mutex& hdf5_mutex() {
  static std::mutex mutex;
  // Runs once, before any caller can hold the mutex (function-local statics are initialised
  // under the compiler's guard), so no other HDF5 call can race with it.
  static const bool silenced = [] {
    H5open();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
  return mutex;
}

}  // namespace tandem
