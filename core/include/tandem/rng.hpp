// Rng: a small, fast, seedable random generator (xoshiro256**) with a state that can be saved
// and restored bit for bit, so runs are reproducible on every platform (the C++ standard
// distributions are not). Not thread-safe: give each thread its own Rng.
#pragma once

#include <array>
#include <cstdint>

#include "tandem/export.hpp"

namespace tandem {

class TANDEM_EXPORT Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) { reseed(seed); }
  void reseed(std::uint64_t seed);

  std::uint64_t next_u64();
  /// Uniform in [0, 1) with 24 random bits (exact in float32).
  float uniform();
  /// `n` uniform() values into out[0..n), the same as n calls, in one loop (a synthetic
  /// dataset's sample of 8,000 values: several times faster than the calls).
  void fill_uniform(float* out, std::int64_t n);
  /// Uniform integer in [0, n), unbiased.
  std::uint64_t below(std::uint64_t n);
  /// Standard normal (Box-Muller, both values used).
  float normal();

  using State = std::array<std::uint64_t, 5>;  // 4 words of xoshiro state + cached normal
  State state() const;
  void set_state(const State& state);

  /// Derives an independent seed from a parent seed and a stream index (splitmix64 mixing).
  static std::uint64_t derive(std::uint64_t seed, std::uint64_t stream);

 private:
  std::array<std::uint64_t, 4> s_{};
  bool has_spare_ = false;
  float spare_ = 0.0f;
};

}  // namespace tandem
