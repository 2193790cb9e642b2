// Whether an HDF5 dataset's values were ever written, and whether they are in its file. A dataset
// whose storage HDF5 never (fully) allocated reads as its fill value where nothing was written,
// without an error: such files come from writers that preallocated and died, from a shape set
// before the data, or from damage to the chunk index (a chunk whose key points outside the dataset
// is not found, and its values read as the fill value). Use only while holding hdf5_mutex(); any
// thread.
#pragma once

#include <hdf5.h>

#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// "" when every value of `dataset` is stored; otherwise why not, as a phrase ("none of it was
/// ever written", "only part of it was written (3 of its 8 chunks stored)"). Chunked data is
/// judged by its chunk count (H5Dget_space_status compares bytes, and compressed chunks are
/// smaller than the data). With `check_chunk_places` each chunk's place is checked too (one
/// index lookup per chunk: for checkpoints, whose arrays have few chunks, not for data sets of
/// many thousands). "" also when HDF5 cannot tell: the read then fails or succeeds.
std::string unwritten_storage(hid_t dataset, bool check_chunk_places);

/// "" when `dataset` keeps its values in its own file; else where they are, as a phrase: "a
/// virtual dataset (its values live in other datasets)", "stored in external files (its values
/// live outside this file)". Such values may come from any file (a FIFO, /dev/zero), and what is
/// missing there reads as the fill value without an error.
std::string borrowed_storage(hid_t dataset);

}  // namespace tandem

TANDEM_INTERNAL_API_END
