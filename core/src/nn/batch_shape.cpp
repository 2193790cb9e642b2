#include "nn/batch_shape.hpp"

#include <algorithm>

#include "tandem/error.hpp"

namespace tandem::nn {

Shape with_batch(std::int64_t batch, const Shape& sample) {
  Shape s{batch};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

void require_batch_of(const Tensor& x, const Shape& sample, const std::string& who) {
  if (x.rank() != static_cast<int>(sample.size()) + 1 ||
      !std::equal(sample.begin(), sample.end(), x.shape().begin() + 1))
    throw ShapeError(who + " expects inputs " + shape_to_string(sample, true) + ", got " +
                     shape_to_string(x.shape()));
}

}  // namespace tandem::nn
