#include "util/utc_time.hpp"

#include <cstdint>
#include <cstdio>
#include <ctime>

namespace tandem::detail {

std::string utc_timestamp(std::chrono::system_clock::time_point time) {
  const auto since_epoch = std::chrono::floor<std::chrono::milliseconds>(time).time_since_epoch();
  const std::int64_t ms = since_epoch.count();
  // Floor division, so that instants before 1970 keep milliseconds in [0, 1000).
  std::int64_t seconds = ms / 1000, millis = ms % 1000;
  if (millis < 0) {
    millis += 1000;
    seconds -= 1;
  }
  const std::time_t secs = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  return buffer;
}

std::string utc_now() {
  return utc_timestamp(std::chrono::system_clock::now());
}

}  // namespace tandem::detail
