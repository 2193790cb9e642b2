#include "util/memory_size.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tandem/error.hpp"

namespace tandem {

std::int64_t parse_memory_size(const std::string& text, const std::string& where) {
  const auto fail = [&] {
    return ConfigError(where,
                       "expected a memory size such as 512M, 1.5GiB or 80G (bytes with "
                       "an optional K, M, G or T), got '" +
                           text + "'");
  };
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw fail();
  }
  std::string unit = text.substr(used);
  for (const char* suffix : {"iB", "B"})
    if (unit.size() > std::strlen(suffix) &&
        unit.compare(unit.size() - std::strlen(suffix), std::string::npos, suffix) == 0) {
      unit.resize(unit.size() - std::strlen(suffix));
      break;
    }
  const std::string units = "KMGT";
  double scale = 1;
  if (unit.size() == 1 && units.find(static_cast<char>(std::toupper(unit[0]))) != std::string::npos)
    scale = std::pow(1024.0,
                     static_cast<double>(units.find(static_cast<char>(std::toupper(unit[0]))) + 1));
  else if (!unit.empty() && unit != "B")
    throw fail();
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 1 || bytes > std::ldexp(1.0, 60) ||
      (unit.empty() && text.find_first_not_of("0123456789") != std::string::npos))
    throw fail();
  return static_cast<std::int64_t>(bytes);
}
HostMemoryLimit host_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  HostMemoryLimit limit{pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page
                                              : std::int64_t{1} << 60,
                        "the machine's memory"};
  if (const char* text = std::getenv("TANDEM_HOST_MEMORY_LIMIT")) {
    const std::int64_t given = parse_memory_size(text, "TANDEM_HOST_MEMORY_LIMIT");
    if (given < limit.bytes) limit = {given, "TANDEM_HOST_MEMORY_LIMIT"};
  }
  return limit;
}

}  // namespace tandem
