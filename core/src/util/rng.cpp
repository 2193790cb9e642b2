#include "tandem/rng.hpp"

#include <cmath>
#include <cstring>

namespace tandem {

namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

// xoshiro256**'s step: the next output of state `s`, which it advances.
inline std::uint64_t xoshiro_next(std::array<std::uint64_t, 4>& s) {
  const std::uint64_t result = rotl(s[1] * 5, 7) * 9;
  const std::uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

// 24 random bits of `bits` as a float in [0, 1).
inline float to_uniform(std::uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1.0p-24f; }

}  // namespace

void Rng::reseed(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& word : s_) word = splitmix64(x);
  has_spare_ = false;
  spare_ = 0.0f;
}

std::uint64_t Rng::next_u64() { return xoshiro_next(s_); }

float Rng::uniform() { return to_uniform(next_u64()); }

void Rng::fill_uniform(float* out, std::int64_t n) {
  std::array<std::uint64_t, 4> s = s_;  // in registers for the loop
  for (std::int64_t i = 0; i < n; ++i) out[i] = to_uniform(xoshiro_next(s));
  s_ = s;
}

std::uint64_t Rng::below(std::uint64_t n) {
  if (n <= 1) return 0;
  const std::uint64_t limit = -n % n;  // 2^64 mod n: reject the biased low range
  for (;;) {
    std::uint64_t r = next_u64();
    if (r >= limit) return r % n;
  }
}

float Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1;
  do {
    u1 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  } while (u1 <= 0.0);
  const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * M_PI * u2;
  spare_ = static_cast<float>(r * std::sin(theta));
  has_spare_ = true;
  return static_cast<float>(r * std::cos(theta));
}

Rng::State Rng::state() const {
  State st{s_[0], s_[1], s_[2], s_[3], 0};
  std::uint32_t bits;
  std::memcpy(&bits, &spare_, sizeof bits);
  st[4] = (static_cast<std::uint64_t>(has_spare_) << 32) | bits;
  return st;
}

void Rng::set_state(const State& state) {
  for (int i = 0; i < 4; ++i) s_[static_cast<std::size_t>(i)] = state[static_cast<std::size_t>(i)];
  has_spare_ = (state[4] >> 32) != 0;
  const auto bits = static_cast<std::uint32_t>(state[4] & 0xffffffffULL);
  std::memcpy(&spare_, &bits, sizeof bits);
}

std::uint64_t Rng::derive(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);
  splitmix64(x);
  return splitmix64(x);
}

}  // namespace tandem
