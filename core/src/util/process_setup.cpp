#include "util/process_setup.hpp"

#include <unistd.h>

#include <cstdlib>

namespace tandem {

void configure_process(int /*argc*/, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (std::getenv("TANDEM_REEXECUTED") != nullptr) return;  // never loop
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::setenv("GOMP_SPINCOUNT", "1000", 0);  // a user's own count wins
  ::setenv("TANDEM_REEXECUTED", "1", 1);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the default policy rather than fail.
}

}  // namespace tandem
