// World: the processes of a run (docs/design.md contract 8). One process, or the ranks of an MPI
// job started by `mpirun -np P tandem train ...`. Collectives are called by every rank in the
// same order, from one thread per process (the one that drives training).
//
// Sums are deterministic: every element is added in rank order 0, 1, ..., P-1 and every rank
// ends with the same bits, whatever the timing or the MPI library's own algorithms.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class World {
 public:
  virtual ~World() = default;
  /// "single" or "mpi".
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Rank and number of ranks on this machine (for choosing a GPU and sharing the cores).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  /// Element-wise sum over ranks of `count` floats, in place.
  virtual void all_reduce_sum(float* data, std::size_t count) = 0;
  /// Every rank's `count` doubles, concatenated in rank order, on every rank.
  virtual std::vector<double> all_gather(const double* data, std::size_t count) = 0;
  /// Every rank's bytes (any length), in rank order, on every rank.
  virtual std::vector<std::string> all_gather_bytes(const std::string& bytes) = 0;
  /// Every rank's floats (any count), concatenated in rank order, on every rank.
  virtual std::vector<float> all_gather_floats(const float* data, std::size_t count) = 0;
  /// `bytes` bytes from `root` into `data` on every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  /// Ends every process of the job now with `exit_code` (a rank that failed must not leave the
  /// others waiting in a collective). Returns only in a world of one process.
  virtual void abort(int exit_code) = 0;
};

/// A world of one process: collectives are copies.
std::shared_ptr<World> single_process_world();

/// The world this process belongs to: the MPI job's ranks when the process was started by an
/// MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK) and Tandem was built
/// with MPI; otherwise one process, and MPI is never initialised. The first call initialises MPI;
/// it is finalised at exit. Throws RunError when launched by mpirun but built without MPI.
std::shared_ptr<World> process_world();

/// True when an MPI launcher started this process (whatever the build).
bool launched_by_mpi();

}  // namespace tandem

TANDEM_INTERNAL_API_END
