// warn_once: a warning logged once per process, however often the code that finds it runs — a
// command builds its model several times (the config check, the placement probe, the run), and
// the user needs to read each warning once.
//
// Thread-safe.
#pragma once

#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Logs `warning` with spdlog::warn unless it is empty or the same text was logged before by this
/// function in this process.
void warn_once(const std::string& warning);

}  // namespace tandem

TANDEM_INTERNAL_API_END
