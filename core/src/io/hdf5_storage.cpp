#include "io/hdf5_storage.hpp"

#include <vector>

#include "io/hdf5_handle.hpp"

namespace tandem {

namespace {

// The chunks of a dataset of these dimensions when every value is written.
hsize_t chunks_when_complete(const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk) {
  hsize_t n = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) n *= (dims[i] + chunk[i] - 1) / chunk[i];
  return n;
}

// "" when each of the `stored` chunks of `dataset` sits at a chunk-aligned place inside its shape;
// else where one does not (the chunk index names another place than its data's).
std::string misplaced_chunk(hid_t dataset, hid_t space, const std::vector<hsize_t>& dims,
                            const std::vector<hsize_t>& chunk, hsize_t stored) {
  std::vector<hsize_t> offset(dims.size());
  for (hsize_t i = 0; i < stored; ++i) {
    unsigned filter_mask = 0;
    haddr_t address = 0;
    hsize_t size = 0;
    if (H5Dget_chunk_info(dataset, space, i, offset.data(), &filter_mask, &address, &size) < 0) {
      H5Eclear2(H5E_DEFAULT);
      return "";
    }
    bool inside = true;
    for (std::size_t d = 0; d < dims.size(); ++d)
      inside = inside && offset[d] < dims[d] && offset[d] % chunk[d] == 0;
    if (inside) continue;
    std::string place;
    for (std::size_t d = 0; d < dims.size(); ++d)
      place += (d ? ", " : "") + std::to_string(offset[d]);
    return "its chunk index is damaged (it places a chunk at (" + place +
           "), outside its shape), so part of it was never found";
  }
  return "";
}

}  // namespace

std::string unwritten_storage(hid_t dataset, bool check_chunk_places) {
  H5Handle space(H5Dget_space(dataset), H5Sclose);  // HDF5 1.10 refuses H5S_ALL below
  H5Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!space.valid() || !dcpl.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || H5Sget_simple_extent_npoints(space.get()) <= 0) return "";  // nothing to write
  if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), chunk(dims.size());
    hsize_t stored = 0;
    if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) != rank ||
        H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank ||
        H5Dget_num_chunks(dataset, space.get(), &stored) < 0) {
      H5Eclear2(H5E_DEFAULT);
      return "";
    }
    const hsize_t complete = chunks_when_complete(dims, chunk);
    if (stored == 0) return "no value of it was ever written";
    if (check_chunk_places)
      if (std::string misplaced = misplaced_chunk(dataset, space.get(), dims, chunk, stored);
          !misplaced.empty())
        return misplaced;
    if (stored < complete)
      return "only part of it was written (" + std::to_string(stored) + " of its " +
             std::to_string(complete) + " chunks stored)";
    return "";
  }
  H5D_space_status_t status{};
  if (H5Dget_space_status(dataset, &status) >= 0 && status == H5D_SPACE_STATUS_NOT_ALLOCATED)
    return "no value of it was ever written";
  H5Eclear2(H5E_DEFAULT);
  return "";
}

std::string borrowed_storage(hid_t dataset) {
  H5Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL)
    return "a virtual dataset (its values live in other datasets)";
  if (H5Pget_external_count(dcpl.get()) > 0)
    return "stored in external files (its values live outside this file)";
  return "";
}

}  // namespace tandem
