#include "nn/input_lengths.hpp"

#include <algorithm>

#include "tandem/error.hpp"

namespace tandem::nn {

std::string declared_shape_text(const Shape& declared, bool batch_dim) {
  std::string text = batch_dim ? "(None" : "(";
  for (std::size_t d = 0; d < declared.size(); ++d)
    text += (d > 0 || batch_dim ? ", " : "") +
            (declared[d] == kAnyLength ? std::string("None") : std::to_string(declared[d]));
  return text + (declared.size() + (batch_dim ? 1 : 0) == 1 ? ",)" : ")");
}

bool has_any_length(const Shape& declared) {
  return std::find(declared.begin(), declared.end(), kAnyLength) != declared.end();
}

bool fits_declared(const Shape& given, const Shape& declared) {
  if (given.size() != declared.size()) return false;
  for (std::size_t d = 0; d < given.size(); ++d)
    if (declared[d] != kAnyLength && declared[d] != given[d]) return false;
  return true;
}

Shape with_data_lengths(const Shape& declared, const Shape& data, const std::string& who,
                        const std::string& path) {
  if (!fits_declared(data, declared))
    throw ShapeError("the data's samples have shape " + shape_to_string(data, true) + " but " +
                     who + " takes " + declared_shape_text(declared, true) + " (" + path +
                     "), whose null lengths Tandem takes from the data");
  return data;
}

}  // namespace tandem::nn
