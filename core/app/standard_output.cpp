#include "app/standard_output.hpp"

#include <cstdio>

#include "tandem/error.hpp"

namespace tandem::app {

void write_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (std::ferror(stdout)) throw RunError("cannot write to standard output");
}

}  // namespace tandem::app
