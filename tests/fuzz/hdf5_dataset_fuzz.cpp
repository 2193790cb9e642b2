// libFuzzer target for the HDF5 dataset reader (data/hdf5_dataset.cpp). The input describes an
// HDF5 file rather than being one: HDF5's own parser of raw file bytes is not Tandem's code (and
// crashes on crafted files, a known class of libhdf5 bugs), so the harness writes a valid file
// through the HDF5 API from the fuzzer's choices — for each of "x", "y" and "sample_weight": a
// dataset of any numeric or string type, rank 0-4, any (small) dimensions, contiguous or chunked
// and compressed, or a group in its place, or nothing — and the reader opens it, in memory or
// through its block cache, and reads every sample. Every such file must be read or refused with a
// tandem::Error; anything else is a finding.
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/datasets.hpp"
#include "fuzz_support.hpp"
#include "hdf5_fuzz_support.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_lock.hpp"
#include "tandem/error.hpp"

namespace {

using tandem::H5Handle;

// One member of the file at `name`, as the fuzzer chooses: missing, a group, or a dataset.
void add_member(hid_t file, const char* name, FuzzedDataProvider& input) {
  const int kind = input.ConsumeIntegralInRange(0, 9);
  if (kind == 0) return;  // missing
  if (kind == 1) {        // a group where a dataset is expected
    H5Handle g(H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    return;
  }
  tandem::fuzz::write_fuzzed_dataset(file, name, input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tandem::fuzz::ScratchFile file(".h5");
  static const bool quiet = (H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), true);
  (void)quiet;
  FuzzedDataProvider input(data, size);
  const bool weighted = input.ConsumeBool();
  const bool cached = input.ConsumeBool();  // through the block cache instead of whole
  {
    std::lock_guard lock(tandem::hdf5_mutex());
    H5Handle f(H5Fcreate(file.path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!f.valid()) return 0;
    add_member(f.get(), "x", input);
    add_member(f.get(), "y", input);
    if (weighted) add_member(f.get(), "sample_weight", input);
  }
  try {
    tandem::data::Hdf5Spec spec;
    spec.file = file.path().string();
    if (weighted) spec.weight_name = "sample_weight";
    tandem::data::Hdf5ReadOptions options;
    if (cached) options = {0, 64, 2};
    tandem::fuzz::read_all(*tandem::data::open_hdf5_dataset(spec, options));
  } catch (const tandem::Error&) {
  }
  return 0;
}
