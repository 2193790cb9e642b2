#include "backend/cpu/eltwise.hpp"

#include <dnnl.hpp>

#include <map>
#include <mutex>
#include <utility>

#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::cpu {

namespace {

dnnl::algorithm algorithm_of(Eltwise f) {
  switch (f) {
    case Eltwise::tanh:
      return dnnl::algorithm::eltwise_tanh;
    case Eltwise::logistic:
      return dnnl::algorithm::eltwise_logistic;
    case Eltwise::gelu_erf:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Eltwise::elu:
      return dnnl::algorithm::eltwise_elu;
    case Eltwise::exp:
      return dnnl::algorithm::eltwise_exp;
    case Eltwise::swish:
      return dnnl::algorithm::eltwise_swish;
    case Eltwise::soft_relu:
      return dnnl::algorithm::eltwise_soft_relu;
  }
  return dnnl::algorithm::eltwise_linear;
}

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mutex;
  std::map<std::pair<int, std::int64_t>, std::pair<dnnl::memory::desc, dnnl::eltwise_forward>>
      cache;
};

Engine& engine() {
  static Engine e;
  return e;
}

}  // namespace

void eltwise_forward(Eltwise function, const float* in, float* out, std::int64_t n) {
  if (n <= 0) return;
  compute_threads();  // thread set-up (flush-to-zero) before the first primitive runs
  Engine& e = engine();
  std::pair<dnnl::memory::desc, dnnl::eltwise_forward> entry;
  try {
    {
      std::lock_guard lock(e.mutex);
      auto key = std::make_pair(static_cast<int>(function), n);
      auto it = e.cache.find(key);
      if (it == e.cache.end()) {
        dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
        // alpha = 1 for elu (alpha (e^x - 1)) and swish (x sigmoid(alpha x)); unused otherwise.
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, algorithm_of(function),
                                      md, 1.0f, 0.0f);
        dnnl::eltwise_forward::primitive_desc pd(d, e.engine);
        it = e.cache.emplace(key, std::make_pair(md, dnnl::eltwise_forward(pd))).first;
      }
      entry = it->second;
    }
    dnnl::stream stream(e.engine);
    dnnl::memory src(entry.first, e.engine, const_cast<float*>(in));
    dnnl::memory dst(entry.first, e.engine, out);
    entry.second.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    stream.wait();
  } catch (const dnnl::error& err) {
    throw RunError(std::string("oneDNN eltwise failed: ") + err.what());
  }
}

}  // namespace tandem::cpu
