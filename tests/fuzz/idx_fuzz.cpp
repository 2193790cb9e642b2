// libFuzzer target for the IDX reader (data/idx_dataset.cpp): an image file and a label file made
// from the input, each plain or gzip-compressed (so that the fuzzer reaches the decoder behind
// gzip without having to find deflate streams itself), read whole (read_idx_file) and as a
// dataset (open_idx_dataset, every sample read). Every bad file must end as a tandem::Error
// (DataError, exit code 2) — any other exception, a crash, a hang, a sanitizer report or an
// allocation beyond -rss_limit_mb (a size in a header trusted) is a finding.
#include <fuzzer/FuzzedDataProvider.h>
#include <zlib.h>

#include <cstdint>
#include <string>

#include "data/datasets.hpp"
#include "fuzz_support.hpp"
#include "tandem/error.hpp"

namespace {

std::string gzip(const std::string& bytes) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, bytes.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tandem::fuzz::ScratchFile x_file(".x.idx"), y_file(".y.idx");
  FuzzedDataProvider input(data, size);
  const bool gzip_x = input.ConsumeBool(), gzip_y = input.ConsumeBool();
  std::string y = input.ConsumeBytesAsString(input.ConsumeIntegralInRange<std::size_t>(0, 4096));
  std::string x = input.ConsumeRemainingBytesAsString();
  x_file.write(gzip_x ? gzip(x) : x);
  y_file.write(gzip_y ? gzip(y) : y);
  try {
    tandem::data::read_idx_file(x_file.path().string());
  } catch (const tandem::Error&) {
  }
  try {
    tandem::data::IdxSpec spec;
    spec.x_file = x_file.path().string();
    spec.y_file = y_file.path().string();
    tandem::fuzz::read_all(*tandem::data::open_idx_dataset(spec));
  } catch (const tandem::Error&) {
  }
  return 0;
}
