// Writing a command's output to standard output, where a closed or full pipe is an error of the
// command (`tandem plugins --json | head -c 10` must not end quietly with half a document).
#pragma once

#include <string>

namespace tandem::app {

/// Writes `text` to stdout and flushes it. Throws RunError when it cannot.
void write_stdout(const std::string& text);

}  // namespace tandem::app
