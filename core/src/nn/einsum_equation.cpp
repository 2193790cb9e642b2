#include "nn/einsum_equation.hpp"

#include <algorithm>
#include <regex>

#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

bool has(const std::string& letters, char c) {
  return letters.find(c) != std::string::npos;
}

std::string quoted(char c) {
  return std::string("'") + c + "'";
}

// The equation's spec named `which` with the ellipsis where it stands ("...abc").
std::string written(const EinsumSpecs& specs, const std::string& spec) {
  switch (specs.ellipsis) {
    case EinsumSpecs::Ellipsis::left:
      return "..." + spec;
    case EinsumSpecs::Ellipsis::right:
      return spec + "...";
    case EinsumSpecs::Ellipsis::none:
      break;
  }
  return spec;
}

// The letters of `letters` that `keep` accepts, in their order.
template <class Keep>
std::string letters_where(const std::string& letters, Keep keep) {
  std::string out;
  for (char c : letters)
    if (keep(c)) out += c;
  return out;
}

}  // namespace

std::optional<EinsumSpecs> split_einsum_equation(const std::string& equation) {
  static const std::regex plain("([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)");
  static const std::regex left("\\.\\.\\.([a-zA-Z]+),([a-zA-Z]+)->\\.\\.\\.([a-zA-Z]+)");
  static const std::regex right("([a-zA-Z]{2,})\\.\\.\\.,([a-zA-Z]+)->([a-zA-Z]+)\\.\\.\\.");
  const std::pair<const std::regex*, EinsumSpecs::Ellipsis> forms[] = {
      {&plain, EinsumSpecs::Ellipsis::none},
      {&left, EinsumSpecs::Ellipsis::left},
      {&right, EinsumSpecs::Ellipsis::right}};
  for (const auto& [form, ellipsis] : forms) {
    std::smatch m;
    if (std::regex_match(equation, m, *form)) return EinsumSpecs{m[1], m[2], m[3], ellipsis};
  }
  return std::nullopt;
}

std::optional<std::string> einsum_spec_problem(const EinsumSpecs& specs,
                                               const std::optional<std::string>& bias_axes) {
  for (const auto& [what, spec] :
       {std::pair<const char*, const std::string*>{"input", &specs.input},
        {"kernel", &specs.kernel},
        {"output", &specs.output}})
    for (std::size_t i = 0; i < spec->size(); ++i)
      if (spec->find((*spec)[i], i + 1) != std::string::npos)
        return std::string("its ") + what + " '" + written(specs, *spec) + "' names axis " +
               quoted((*spec)[i]) + " twice (a diagonal, which Tandem does not take)";
  for (char c : specs.output)
    if (!has(specs.input, c) && !has(specs.kernel, c))
      return "output axis " + quoted(c) + " is neither the input's nor the kernel's";
  for (char c : specs.kernel)
    if (!has(specs.input, c) && !has(specs.output, c))
      return "kernel axis " + quoted(c) + " is neither the input's nor the output's";
  for (char c : specs.input)
    if (!has(specs.kernel, c) && !has(specs.output, c))
      return "input axis " + quoted(c) +
             " is summed over the input alone (in neither the kernel nor the output), which "
             "Tandem does not take";
  if (specs.ellipsis != EinsumSpecs::Ellipsis::left) {
    const char batch = specs.input[0];
    if (specs.output[0] != batch)
      return "the output must keep the batch axis " + quoted(batch) + " first, as the input has it";
    if (has(specs.kernel, batch))
      return "the batch axis " + quoted(batch) + " cannot be the kernel's";
  }
  if (bias_axes) {
    if (bias_axes->empty()) return std::string("bias_axes names no axis");
    for (std::size_t i = 0; i < bias_axes->size(); ++i) {
      const char c = (*bias_axes)[i];
      if (!has(specs.output, c))
        return "bias axis " + quoted(c) + " is not an axis of the output '" +
               written(specs, specs.output) + "'";
      if (bias_axes->find(c, i + 1) != std::string::npos)
        return "bias_axes names axis " + quoted(c) + " twice";
    }
  }
  return std::nullopt;
}

Shape EinsumPlan::dims(const std::string& letters, std::int64_t rows) const {
  Shape out;
  for (char c : letters) {
    if (c == batch) {
      out.push_back(rows);
      continue;
    }
    for (const auto& [letter, size] : sizes)
      if (letter == c) out.push_back(size);
  }
  return out;
}

std::vector<int> axis_order(const std::string& from, const std::string& to) {
  std::vector<int> order;
  for (char c : to) order.push_back(static_cast<int>(from.find(c)));
  return order;
}

EinsumPlan plan_einsum(const EinsumSpecs& specs, const Shape& input_shape,
                       const std::vector<std::optional<std::int64_t>>& partial_output,
                       const std::optional<std::string>& bias_axes, const std::string& who) {
  const auto fail = [&](const std::string& what) -> void { throw ShapeError(who + ": " + what); };
  if (auto problem = einsum_spec_problem(specs, bias_axes)) fail(*problem);
  const auto rank = static_cast<std::int64_t>(input_shape.size()) + 1;
  const std::int64_t elided = rank - static_cast<std::int64_t>(specs.input.size());
  if (elided < 0 || (specs.ellipsis == EinsumSpecs::Ellipsis::none && elided != 0) || elided > 10)
    fail("its equation's input '" + written(specs, specs.input) + "' does not fit inputs " +
         shape_to_string(input_shape, true));
  EinsumPlan p;
  std::string passed;  // the ellipsis' axes
  for (std::int64_t i = 0; i < elided; ++i) passed += static_cast<char>('0' + i);
  const bool left = specs.ellipsis == EinsumSpecs::Ellipsis::left;
  p.input_axes = left ? passed + specs.input : specs.input + passed;
  p.output_axes = left ? passed + specs.output : specs.output + passed;
  p.kernel_axes = specs.kernel;
  p.batch = p.input_axes[0];
  if (p.output_axes[0] != p.batch || has(p.kernel_axes, p.batch))
    fail("the batch axis must stay the output's first and not be the kernel's");

  for (std::size_t i = 1; i < p.input_axes.size(); ++i)
    p.sizes.emplace_back(p.input_axes[i], input_shape[i - 1]);
  // Keras' output_shape sizes the output spec's letters after the batch's (all of them when the
  // ellipsis holds the batch).
  const std::string sized = left && elided > 0 ? specs.output : specs.output.substr(1);
  if (partial_output.size() != sized.size())
    fail("its output_shape has " + std::to_string(partial_output.size()) +
         " axes, but its equation's output '" + written(specs, specs.output) + "' sizes " +
         std::to_string(sized.size()));
  for (std::size_t i = 0; i < sized.size(); ++i) {
    const char c = sized[i];
    const std::optional<std::int64_t>& want = partial_output[i];
    if (has(p.input_axes, c)) {
      const std::int64_t have = p.dims(std::string(1, c), 0)[0];
      if (want && *want != have)
        fail("its output_shape gives axis " + quoted(c) + " " + std::to_string(*want) +
             ", but its inputs " + shape_to_string(input_shape, true) + " give " +
             std::to_string(have));
    } else if (!want) {
      fail("its output_shape gives no size for axis " + quoted(c) + ", which only the kernel has");
    } else if (*want <= 0) {
      fail("its output_shape gives axis " + quoted(c) + " the size " + std::to_string(*want));
    } else {
      p.sizes.emplace_back(c, *want);
    }
  }
  p.kernel_shape = p.dims(p.kernel_axes, 0);
  p.output_shape = p.dims(p.output_axes.substr(1), 0);

  const auto in = [](const std::string& letters) {
    return [&letters](char c) { return has(letters, c); };
  };
  const std::string& x = p.input_axes;
  const std::string& w = p.kernel_axes;
  const std::string& y = p.output_axes;
  const std::string s = letters_where(y, [&](char c) { return in(x)(c) && in(w)(c); });
  const std::string m = letters_where(x, [&](char c) { return in(y)(c) && !in(w)(c); });
  const std::string k = letters_where(x, [&](char c) { return in(w)(c) && !in(y)(c); });
  const std::string n = letters_where(y, [&](char c) { return in(w)(c) && !in(x)(c); });
  p.smk = s + m + k;
  p.skn = s + k + n;
  p.smn = s + m + n;
  const auto product = [&](const std::string& letters) {
    std::int64_t total = 1;
    for (std::int64_t d : p.dims(letters_where(letters, [&](char c) { return c != p.batch; }), 0))
      total *= d;
    return total;
  };
  p.s = product(s);
  p.m_per_sample = product(m);
  p.k = product(k);
  p.n = product(n);

  if (bias_axes) {
    if (has(*bias_axes, p.batch)) fail("its bias cannot span the batch axis");
    std::size_t first = specs.output.size();
    for (char c : *bias_axes) first = std::min(first, specs.output.find(c));
    Shape bias;
    for (char c : specs.output.substr(first))
      bias.push_back(has(*bias_axes, c) ? p.dims(std::string(1, c), 0)[0] : 1);
    if (!left)
      for (std::int64_t i = 0; i < elided; ++i) bias.push_back(1);
    p.bias_shape = bias;
    const std::string per_sample = y.substr(1);
    p.biased = letters_where(per_sample, [&](char c) { return has(*bias_axes, c); });
    p.broadcast = letters_where(per_sample, [&](char c) { return !has(*bias_axes, c); });
  }
  return p;
}

}  // namespace tandem::nn
