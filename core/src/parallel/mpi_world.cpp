// process_world() with MPI: the ranks of the job, with deterministic collectives.
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "data/data_loader.hpp"
#include "tandem/error.hpp"
#include "parallel/world.hpp"

namespace tandem {

namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw RunError(std::string("MPI ") + what + " failed: " + std::string(text, length));
}

int as_count(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw RunError(std::string("MPI ") + what + ": " + std::to_string(n) +
                   " elements is more than one MPI call carries");
  return static_cast<int>(n);
}

class MpiWorld : public World {
 public:
  MpiWorld() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      // One thread at a time calls MPI: the one that drives training, or (synchronized batch
      // statistics) the replica worker that arrives last at a CrossReplicaSum.
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
      if (provided < MPI_THREAD_SERIALIZED)
        throw RunError(
            "this MPI library does not support MPI_THREAD_SERIALIZED, which Tandem "
            "needs; use Open MPI or MPICH as packaged by Debian");
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
          "split by machine");
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  // Reduce-scatter by hand, then all-gather: rank r receives every rank's part r of the buffer
  // and adds the parts in rank order, so each element is summed 0 + 1 + ... + (P-1) and all ranks
  // end with the same bits. Bandwidth as a ring all-reduce: 2·(P−1)/P of the buffer per rank.
  void all_reduce_sum(float* data, std::size_t count) override {
    if (size_ == 1 || count == 0) return;
    as_count(count, "all-reduce");
    std::vector<int> counts(size_), displs(size_);
    for (int r = 0; r < size_; ++r) {
      const Shard s = shard_of(static_cast<std::int64_t>(count), size_, r);
      counts[r] = static_cast<int>(s.size);
      displs[r] = static_cast<int>(s.offset);
    }
    const int mine = counts[rank_];
    parts_.resize(static_cast<std::size_t>(mine) * size_);
    std::vector<int> recv_counts(size_, mine), recv_displs(size_);
    for (int r = 0; r < size_; ++r) recv_displs[r] = r * mine;
    check(MPI_Alltoallv(data, counts.data(), displs.data(), MPI_FLOAT, parts_.data(),
                        recv_counts.data(), recv_displs.data(), MPI_FLOAT, MPI_COMM_WORLD),
          "all-to-all (all-reduce)");
    sum_.assign(parts_.begin(), parts_.begin() + mine);
    for (int r = 1; r < size_; ++r) {
      const float* part = parts_.data() + static_cast<std::size_t>(r) * mine;
      for (int k = 0; k < mine; ++k) sum_[k] += part[k];
    }
    check(MPI_Allgatherv(sum_.data(), mine, MPI_FLOAT, data, counts.data(), displs.data(),
                         MPI_FLOAT, MPI_COMM_WORLD),
          "all-gather (all-reduce)");
  }

  std::vector<double> all_gather(const double* data, std::size_t count) override {
    std::vector<double> out(count * size_);
    const int n = as_count(count, "all-gather");
    check(MPI_Allgather(data, n, MPI_DOUBLE, out.data(), n, MPI_DOUBLE, MPI_COMM_WORLD),
          "all-gather");
    return out;
  }

  std::vector<std::string> all_gather_bytes(const std::string& bytes) override {
    std::vector<char> flat;
    std::vector<int> counts, displs;
    gather_v(bytes.data(), as_count(bytes.size(), "all-gather"), MPI_CHAR, flat, counts, displs);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.emplace_back(flat.data() + displs[r], counts[r]);
    return out;
  }

  std::vector<float> all_gather_floats(const float* data, std::size_t count) override {
    std::vector<float> flat;
    std::vector<int> counts, displs;
    gather_v(data, as_count(count, "all-gather"), MPI_FLOAT, flat, counts, displs);
    return flat;
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    check(MPI_Bcast(data, as_count(bytes, "broadcast"), MPI_BYTE, root, MPI_COMM_WORLD),
          "broadcast");
  }

  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }

  void abort(int exit_code) override { MPI_Abort(MPI_COMM_WORLD, exit_code); }

 private:
  template <class T>
  void gather_v(const T* data, int count, MPI_Datatype type, std::vector<T>& flat,
                std::vector<int>& counts, std::vector<int>& displs) {
    counts.assign(size_, 0);
    check(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD),
          "all-gather (sizes)");
    displs.assign(size_, 0);
    long long total = 0;
    for (int r = 0; r < size_; ++r) {
      displs[r] = static_cast<int>(total);
      total += counts[r];
    }
    if (total > INT_MAX) throw RunError("MPI all-gather: more than one MPI call carries");
    flat.resize(static_cast<std::size_t>(total));
    check(MPI_Allgatherv(data, count, type, flat.data(), counts.data(), displs.data(), type,
                         MPI_COMM_WORLD),
          "all-gather");
  }

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::vector<float> parts_, sum_;
};

}  // namespace

std::shared_ptr<World> process_world() {
  static std::once_flag once;
  static std::shared_ptr<World> world;
  std::call_once(once, [] {
    if (launched_by_mpi())
      world = std::make_shared<MpiWorld>();
    else
      world = single_process_world();
  });
  return world;
}

}  // namespace tandem
