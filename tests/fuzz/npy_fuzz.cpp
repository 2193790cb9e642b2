// libFuzzer target for the NumPy readers (data/npy_format.cpp, data/npz_archive.cpp,
// data/npy_dataset.cpp): the input is a .npz archive when it starts like a zip file ("PK"), else
// a .npy file; it is opened as a dataset the way a run opens one (the .npy as both x and y; the
// archive's arrays x and y) and every sample read, whole and row by row from the file (the
// input's size picks which). Every bad file must end as a tandem::Error
// (DataError, exit code 2) — any other exception, a crash, a sanitizer report or an allocation
// beyond -rss_limit_mb (a size in a header trusted) is a finding.
#include <cstdint>
#include <string_view>

#include "data/datasets.hpp"
#include "data/npy_format.hpp"
#include "fuzz_support.hpp"
#include "tandem/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tandem::fuzz::ScratchFile npy(".npy"), npz(".npz");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const bool archive = bytes.substr(0, 2) == "PK";
  tandem::data::NpySpec spec;
  spec.npz = archive;
  if (size % 2 == 1) spec.whole_limit_bytes = 0;  // read row by row from the file
  if (archive) {
    spec.archive = npz.write(bytes).string();
    spec.x = "x";
    spec.y = "y";
  } else {
    spec.x = spec.y = npy.write(bytes).string();
    try {
      tandem::data::parse_npy_header(bytes, "fuzz");
    } catch (const tandem::Error&) {
    }
  }
  try {
    tandem::fuzz::read_all(*tandem::data::open_npy_dataset(spec));
  } catch (const tandem::Error&) {
  }
  return 0;
}
