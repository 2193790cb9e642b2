#include "util/utc_time.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "tandem/event_sink.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using std::chrono::milliseconds;
using std::chrono::system_clock;

system_clock::time_point at_ms(long long ms) {
  return system_clock::time_point(
      std::chrono::duration_cast<system_clock::duration>(milliseconds(ms)));
}

TEST(UtcTime, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(detail::utc_timestamp(at_ms(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(detail::utc_timestamp(at_ms(1700000000123)), "2023-11-14T22:13:20.123Z");
  // Milliseconds are truncated, never rounded up into the next second.
  EXPECT_EQ(detail::utc_timestamp(at_ms(1700000000999) + std::chrono::microseconds(900)),
            "2023-11-14T22:13:20.999Z");
  EXPECT_EQ(detail::utc_timestamp(at_ms(-1)), "1969-12-31T23:59:59.999Z");
}

TEST(UtcTime, NowIsTheCurrentTimeInTheEventFormat) {
  const std::regex format(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  const auto before = detail::utc_timestamp(std::chrono::floor<milliseconds>(system_clock::now()));
  const std::string now = detail::utc_now();
  const std::string plugin_now = EventSink::utc_now();  // what plugins stamp their records with
  const auto after = detail::utc_timestamp(system_clock::now());
  EXPECT_TRUE(std::regex_match(now, format)) << now;
  EXPECT_TRUE(std::regex_match(plugin_now, format)) << plugin_now;
  // The fixed-width format sorts as the instants do.
  EXPECT_LE(before, now);
  EXPECT_LE(now, plugin_now);
  EXPECT_LE(plugin_now, after);
}

}  // namespace
}  // namespace tandem
