#include "nn/activation_fn.hpp"

#include <cmath>

#include "backend/cpu/eltwise.hpp"
#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

struct NamedKind {
  const char* name;
  ActivationKind kind;
};

constexpr NamedKind kNames[] = {{"linear", ActivationKind::linear},
                                {"relu", ActivationKind::relu},
                                {"tanh", ActivationKind::tanh},
                                {"sigmoid", ActivationKind::sigmoid},
                                {"softmax", ActivationKind::softmax},
                                {"gelu", ActivationKind::gelu},
                                {"elu", ActivationKind::elu},
                                {"selu", ActivationKind::selu},
                                {"softplus", ActivationKind::softplus},
                                {"softsign", ActivationKind::softsign},
                                {"swish", ActivationKind::swish},
                                {"silu", ActivationKind::swish},
                                {"exponential", ActivationKind::exponential}};

// Below ~64k floats a second thread costs more than it saves (these loops are memory bound).
constexpr std::int64_t kChunk = 65536;
constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluScale = 1.0507009873554805f;
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

template <class F>
void map(const float* in, float* out, std::int64_t n, F f) {
  cpu::parallel_for(n, kChunk, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = f(in[i]);
  });
}

// g[i] = go[i] * d(x[i], y[i])
template <class D>
void chain(const float* x, const float* y, const float* go, float* gi, std::int64_t n, D d) {
  cpu::parallel_for(n, kChunk, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) gi[i] = go[i] * d(x[i], y[i]);
  });
}

float sigmoid(float x) {
  // Stable for large |x|.
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float z = std::exp(x);
  return z / (1.0f + z);
}

}  // namespace

ActivationKind parse_activation(const std::string& name, const std::string& path) {
  for (const auto& n : kNames)
    if (name == n.name) return n.kind;
  std::string list;
  for (const auto& n : kNames) list += (list.empty() ? "" : ", ") + std::string(n.name);
  throw ConfigError(path, "unknown activation '" + name + "' (known: " + list + ")");
}

std::string activation_name(ActivationKind kind) {
  for (const auto& n : kNames)
    if (n.kind == kind) return n.name;
  return "linear";
}

std::vector<std::string> activation_names() {
  std::vector<std::string> out;
  for (const auto& n : kNames) out.emplace_back(n.name);
  return out;
}

void activation_forward(ActivationKind kind, const float* in, float* out, std::int64_t rows,
                        std::int64_t cols) {
  const std::int64_t n = rows * cols;
  switch (kind) {
    case ActivationKind::linear:
      if (in != out) map(in, out, n, [](float x) { return x; });
      return;
    case ActivationKind::relu:  // std::max(NaN, 0) is NaN: a NaN input must not vanish
      map(in, out, n, [](float x) { return std::max(x, 0.0f); });
      return;
    case ActivationKind::tanh:
      cpu::eltwise_forward(cpu::Eltwise::tanh, in, out, n);
      return;
    case ActivationKind::sigmoid:
      cpu::eltwise_forward(cpu::Eltwise::logistic, in, out, n);
      return;
    case ActivationKind::gelu:
      cpu::eltwise_forward(cpu::Eltwise::gelu_erf, in, out, n);
      return;
    case ActivationKind::elu:
      cpu::eltwise_forward(cpu::Eltwise::elu, in, out, n);
      return;
    case ActivationKind::selu:
      map(in, out, n,
          [](float x) { return kSeluScale * (x > 0 ? x : kSeluAlpha * std::expm1(x)); });
      return;
    case ActivationKind::softplus:
      cpu::eltwise_forward(cpu::Eltwise::soft_relu, in, out, n);
      return;
    case ActivationKind::softsign:
      map(in, out, n, [](float x) { return x / (1.0f + std::fabs(x)); });
      return;
    case ActivationKind::swish:
      cpu::eltwise_forward(cpu::Eltwise::swish, in, out, n);
      return;
    case ActivationKind::exponential:
      cpu::eltwise_forward(cpu::Eltwise::exp, in, out, n);
      return;
    case ActivationKind::softmax:
      cpu::parallel_for(rows, std::max<std::int64_t>(1, kChunk / std::max<std::int64_t>(cols, 1)),
                        [&](std::int64_t b, std::int64_t e) {
                          for (std::int64_t r = b; r < e; ++r) {
                            const float* x = in + r * cols;
                            float* y = out + r * cols;
                            float mx = x[0];
                            for (std::int64_t c = 1; c < cols; ++c) mx = std::max(mx, x[c]);
                            double sum = 0;
                            for (std::int64_t c = 0; c < cols; ++c) {
                              y[c] = std::exp(x[c] - mx);
                              sum += y[c];
                            }
                            const float inv = static_cast<float>(1.0 / sum);
                            for (std::int64_t c = 0; c < cols; ++c) y[c] *= inv;
                          }
                        });
      return;
  }
}

void activation_backward(ActivationKind kind, const float* in, const float* out,
                         const float* grad_out, float* grad_in, std::int64_t rows,
                         std::int64_t cols) {
  const std::int64_t n = rows * cols;
  switch (kind) {
    case ActivationKind::linear:
      if (grad_in != grad_out)
        chain(in, out, grad_out, grad_in, n, [](float, float) { return 1.0f; });
      return;
    case ActivationKind::relu:
      chain(in, out, grad_out, grad_in, n, [](float x, float) { return x > 0 ? 1.0f : 0.0f; });
      return;
    case ActivationKind::tanh:
      chain(in, out, grad_out, grad_in, n, [](float, float y) { return 1.0f - y * y; });
      return;
    case ActivationKind::sigmoid:
      chain(in, out, grad_out, grad_in, n, [](float, float y) { return y * (1.0f - y); });
      return;
    case ActivationKind::gelu:
      chain(in, out, grad_out, grad_in, n, [](float x, float) {
        return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
      });
      return;
    case ActivationKind::elu:
      chain(in, out, grad_out, grad_in, n,
            [](float x, float y) { return x > 0 ? 1.0f : y + 1.0f; });
      return;
    case ActivationKind::selu:
      chain(in, out, grad_out, grad_in, n,
            [](float x, float y) { return x > 0 ? kSeluScale : y + kSeluScale * kSeluAlpha; });
      return;
    case ActivationKind::softplus:
      chain(in, out, grad_out, grad_in, n, [](float x, float) { return sigmoid(x); });
      return;
    case ActivationKind::softsign:
      chain(in, out, grad_out, grad_in, n, [](float x, float) {
        const float d = 1.0f + std::fabs(x);
        return 1.0f / (d * d);
      });
      return;
    case ActivationKind::swish:
      chain(in, out, grad_out, grad_in, n, [](float x, float) {
        const float s = sigmoid(x);
        return s * (1.0f + x * (1.0f - s));
      });
      return;
    case ActivationKind::exponential:
      chain(in, out, grad_out, grad_in, n, [](float, float y) { return y; });
      return;
    case ActivationKind::softmax:
      cpu::parallel_for(rows, std::max<std::int64_t>(1, kChunk / std::max<std::int64_t>(cols, 1)),
                        [&](std::int64_t b, std::int64_t e) {
                          for (std::int64_t r = b; r < e; ++r) {
                            const float* y = out + r * cols;
                            const float* g = grad_out + r * cols;
                            float* gi = grad_in + r * cols;
                            double dot = 0;
                            for (std::int64_t c = 0; c < cols; ++c) dot += g[c] * y[c];
                            const float d = static_cast<float>(dot);
                            for (std::int64_t c = 0; c < cols; ++c) gi[c] = y[c] * (g[c] - d);
                          }
                        });
      return;
  }
}

}  // namespace tandem::nn
