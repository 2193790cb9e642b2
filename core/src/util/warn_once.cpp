#include "util/warn_once.hpp"

#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

namespace tandem {

void warn_once(const std::string& warning) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  if (warning.empty()) return;
  const std::lock_guard lock(mutex);
  if (logged.insert(warning).second) spdlog::warn("{}", warning);
}

}  // namespace tandem
