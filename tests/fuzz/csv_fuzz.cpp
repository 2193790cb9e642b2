// libFuzzer target for the CSV reader (data/csv_dataset.cpp over libcsv): the input is the
// table, read as a dataset whose target is column "y" with the declared categories
// {"c": ["a", "b"]}, every sample read. Every bad table must end as a tandem::Error (DataError,
// exit code 2) — any other exception, a crash, a sanitizer report or a hang is a finding.
#include <cstdint>
#include <string_view>

#include "data/datasets.hpp"
#include "fuzz_support.hpp"
#include "tandem/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tandem::fuzz::ScratchFile table(".csv");
  tandem::data::CsvSpec spec;
  spec.file = table.write(std::string_view(reinterpret_cast<const char*>(data), size)).string();
  spec.y = {"y"};
  spec.categories["c"] = {"a", "b"};
  try {
    tandem::fuzz::read_all(*tandem::data::open_csv_dataset(spec));
  } catch (const tandem::Error&) {
  }
  return 0;
}
