#include "nn/random_stream.hpp"

#include "backend/kernel_math.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

void RandomStream::build(Rng& init) {
  stream_ = seed_ ? backend::math::mix(*seed_ + 0x9e3779b97f4a7c15ULL) : init.next_u64();
}

backend::DropoutDesc RandomStream::next_call(double rate, std::int64_t first_sample) {
  backend::DropoutDesc d;
  d.stream = stream_;
  d.call = calls_++;
  d.rate = rate;
  d.first_sample = first_sample;
  return d;
}

void RandomStream::set_state(const std::vector<std::uint64_t>& state, const std::string& layer) {
  if (state.size() != 2)
    throw DataError("layer '" + layer + "': a random state has 2 numbers, got " +
                    std::to_string(state.size()));
  stream_ = state[0];
  calls_ = state[1];
}

}  // namespace tandem::nn
