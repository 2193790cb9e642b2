// The process-wide lock for the HDF5 C library.
//
// Debian's serial HDF5 is not thread-safe, and both checkpoint I/O and the data loader's
// background thread use it, so every HDF5 call (closing handles included) must hold this mutex.
#pragma once

#include <mutex>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// The mutex to hold around every HDF5 call. The first call also turns off HDF5's automatic
/// printing of its error stack to stderr: callers report HDF5 failures as exceptions instead.
std::mutex& hdf5_mutex();

}  // namespace tandem

TANDEM_INTERNAL_API_END
