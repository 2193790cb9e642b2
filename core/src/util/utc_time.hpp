// Private: the engine's wall-clock time stamps ("2026-11-21T05:36:00.123Z": UTC, ISO 8601 with
// milliseconds), as events, device samples and checkpoint indexes record them. Plugins get the
// same through EventSink::utc_now() (tandem/event_sink.hpp). Thread-safe (gmtime_r).
#pragma once

#include <chrono>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

/// `time` as "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC; milliseconds truncated).
std::string utc_timestamp(std::chrono::system_clock::time_point time);

/// utc_timestamp(now).
std::string utc_now();

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
