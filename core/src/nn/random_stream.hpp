// RandomStream: the random state of a layer that draws per training forward (Dropout and its
// spatial forms, GaussianNoise, GaussianDropout). Its numbers are a counter-based hash of
// (stream, call, global sample index, element) (kernel_math.hpp's dropout_* and normal_noise),
// not a sequential generator: a replica holding rows [offset, offset + n) of a batch draws
// exactly what the whole-batch model draws for those rows, so the draws never depend on the
// device plan (contract 1).
// A plain value, owned by its layer; one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/ops.hpp"
#include "tandem/rng.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class RandomStream {
 public:
  explicit RandomStream(std::optional<std::uint64_t> seed) : seed_(seed) {}
  /// Picks the stream: from the config's seed, else the next number of the model's init stream.
  void build(Rng& init);
  /// The key of the next training forward, whose rows start at global sample `first_sample`
  /// (counts the call).
  backend::DropoutDesc next_call(double rate, std::int64_t first_sample);
  std::optional<std::uint64_t> seed() const { return seed_; }
  /// The Layer::random_state form: {stream, training forwards so far}.
  std::vector<std::uint64_t> state() const { return {stream_, calls_}; }
  /// Throws DataError naming `layer` for a state that is not two numbers.
  void set_state(const std::vector<std::uint64_t>& state, const std::string& layer);

 private:
  std::optional<std::uint64_t> seed_;
  std::uint64_t stream_ = 0;
  std::uint64_t calls_ = 0;  // training forwards so far: the same on every replica
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
