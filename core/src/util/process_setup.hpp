// Process set-up that must happen before any compute: call first thing in main().
//
// Tandem's kernels and oneDNN share one OpenMP team. libgomp's default wait policy spins idle
// threads for a while after each parallel region (300,000 spins, ~3 ms); on a machine with few
// cores that spinning steals the cores from the data-loading thread and from other processes
// (measured: one Fashion-MNIST epoch took 12 s instead of 2 s beside two busy processes).
// PASSIVE alone, though, puts a worker to sleep at once, and the next region — often
// microseconds later, within the same layer — pays a futex wake-up through the hypervisor.
// So the worker spins 1,000 times (~10 µs) and then sleeps: as fast as PASSIVE next to a busy
// process, 5-11% faster on a quiet machine (docs/benchmarks.md, "OMP_WAIT_POLICY"). libgomp reads both settings from the environment only when it loads, so
// when OMP_WAIT_POLICY is unset this re-executes the program once with OMP_WAIT_POLICY=PASSIVE
// and GOMP_SPINCOUNT=1000. A user's explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
#pragma once

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// May not return (re-exec). Safe to call more than once.
void configure_process(int argc, char** argv);

}  // namespace tandem

TANDEM_INTERNAL_API_END
