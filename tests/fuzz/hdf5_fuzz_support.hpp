// HDF5 pieces shared by the fuzz targets that read HDF5 files: a dataset of the fuzzer's choice.
// Call with tandem::hdf5_mutex() held.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "io/hdf5_handle.hpp"

namespace tandem::fuzz {

/// A numeric type of any width and signedness, or a fixed-length string type (the caller closes it).
inline hid_t pick_type(FuzzedDataProvider& input) {
  const hid_t types[] = {H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE, H5T_NATIVE_SCHAR, H5T_NATIVE_UCHAR,
                         H5T_NATIVE_SHORT, H5T_NATIVE_USHORT, H5T_NATIVE_INT,   H5T_NATIVE_UINT,
                         H5T_NATIVE_LLONG, H5T_NATIVE_ULLONG};
  const std::size_t pick = input.ConsumeIntegralInRange<std::size_t>(0, std::size(types));
  if (pick == std::size(types)) {
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, input.ConsumeIntegralInRange<std::size_t>(1, 16));
    return t;
  }
  return H5Tcopy(types[pick]);
}

/// Creates dataset `name` in `loc`: type from pick_type, rank 0-4, small dimensions (the first up
/// to 64), contiguous or chunked (maybe compressed, maybe checksummed), its bytes from the input.
inline void write_fuzzed_dataset(hid_t loc, const char* name, FuzzedDataProvider& input) {
  const int rank = input.ConsumeIntegralInRange(0, 4);
  hsize_t dims[4];
  hsize_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    dims[i] = input.ConsumeIntegralInRange<hsize_t>(0, i == 0 ? 64 : 8);
    elements *= dims[i];
  }
  H5Handle type(pick_type(input), H5Tclose);
  H5Handle space(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, nullptr),
                 H5Sclose);
  H5Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (rank > 0 && elements > 0 && input.ConsumeBool()) {
    hsize_t chunk[4];
    for (int i = 0; i < rank; ++i)
      chunk[i] = input.ConsumeIntegralInRange<hsize_t>(1, std::max<hsize_t>(dims[i], 1));
    H5Pset_chunk(props.get(), rank, chunk);
    if (input.ConsumeBool()) H5Pset_deflate(props.get(), 1);
    if (input.ConsumeBool()) H5Pset_fletcher32(props.get());
  }
  H5Handle set(H5Dcreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, props.get(),
                          H5P_DEFAULT),
               H5Dclose);
  if (!set.valid() || elements == 0) return;
  const std::size_t bytes_needed = elements * H5Tget_size(type.get());
  std::string bytes = input.ConsumeBytesAsString(bytes_needed);
  bytes.resize(bytes_needed, '\0');
  H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
}

}  // namespace tandem::fuzz
