#include "backend/cpu/dnnl_engine.hpp"

namespace tandem::cpu {

const dnnl::engine& dnnl_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory dnnl_user_memory(const dnnl::memory::desc& desc, void* data) {
  // DNNL_MEMORY_NONE: no buffer is allocated; the caller points it at its own storage.
  dnnl::memory m(desc, dnnl_engine(), DNNL_MEMORY_NONE);
  if (data) m.set_data_handle(data);
  return m;
}

dnnl::memory::desc dnnl_matrix_desc(std::int64_t batch, std::int64_t rows, std::int64_t cols,
                                    bool transposed, dnnl::memory::data_type type) {
  const dnnl::memory::dims inner =
      transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
  if (batch == 1) return dnnl::memory::desc({rows, cols}, type, inner);
  return dnnl::memory::desc({batch, rows, cols}, type, {rows * cols, inner[0], inner[1]});
}

dnnl::primitive_attr dnnl_user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace tandem::cpu
