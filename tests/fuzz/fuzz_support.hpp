// Helpers shared by the libFuzzer targets of tests/fuzz: the readers under test take file names,
// so each input is written to a file of this process first; and the read of a dataset the way
// training reads it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.hpp"

namespace tandem::fuzz {

/// A file of this process (in $TMPDIR or /tmp), rewritten for each input; removed at exit.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& suffix) {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
            ("tandem-fuzz-" + std::to_string(::getpid()) + suffix);
  }
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::filesystem::path& write(std::string_view bytes) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    return path_;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Reads every sample of `dataset` in batches, as the data loader does; at most `limit` samples
/// (the readers check sizes against the file, but a valid file may still be large).
inline void read_all(const Dataset& dataset, std::int64_t limit = 4096) {
  const std::int64_t n = std::min(dataset.size(), limit);
  const std::int64_t x_size = shape_size(dataset.x_shape()), y_size = shape_size(dataset.y_shape());
  const std::int64_t y_row = y_size + dataset.weight_count();
  if (x_size > (1 << 20) || y_row > (1 << 20)) return;  // a sample larger than the input
  const std::int64_t batch = 16;
  std::vector<float> x, y;
  for (std::int64_t start = 0; start < n; start += batch) {
    const std::int64_t count = std::min(batch, n - start);
    std::vector<std::int64_t> indices(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) indices[static_cast<std::size_t>(i)] = n - 1 - start - i;
    x.resize(static_cast<std::size_t>(count * x_size));
    y.resize(static_cast<std::size_t>(count * y_row));
    dataset.read(indices, x.data(), y.data());
  }
}

}  // namespace tandem::fuzz
