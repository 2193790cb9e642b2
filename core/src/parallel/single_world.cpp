// The world of one process, and the launcher detection shared by both builds.
#include <cstdlib>
#include <cstring>

#include "parallel/world.hpp"

namespace tandem {

namespace {

class SingleWorld : public World {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void all_reduce_sum(float*, std::size_t) override {}
  std::vector<double> all_gather(const double* data, std::size_t count) override {
    return std::vector<double>(data, data + count);
  }
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override { return {bytes}; }
  std::vector<float> all_gather_floats(const float* data, std::size_t count) override {
    return std::vector<float>(data, data + count);
  }
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  void abort(int) override {}
};

}  // namespace

std::shared_ptr<World> single_process_world() {
  static const auto world = std::make_shared<SingleWorld>();
  return world;
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* value = std::getenv(name);
    if (value && *value) return true;
  }
  return false;
}

}  // namespace tandem
