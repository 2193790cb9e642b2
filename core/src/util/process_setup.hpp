// Process set-up that must happen before any compute: call first thing in main().
//
// Tandem's kernels and oneDNN share one OpenMP team. libgomp's default wait policy spins idle
// threads for a while after each parallel region; on a machine with few cores that spinning
// steals the cores from the data-loading thread and from other processes (measured: one
// Fashion-MNIST epoch took 10 s instead of 1.3 s while another build ran). libgomp reads its
// policy from the environment only when it loads, so when OMP_WAIT_POLICY is unset this
// re-executes the program once with OMP_WAIT_POLICY=PASSIVE. A user's explicit setting wins.
#pragma once

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// May not return (re-exec). Safe to call more than once.
void configure_process(int argc, char** argv);

}  // namespace tandem

TANDEM_INTERNAL_API_END
