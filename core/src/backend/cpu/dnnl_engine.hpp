// The process-wide oneDNN CPU engine, shared by the layers that run oneDNN primitives
// (convolution, pooling). Include only from .cpp files: it brings in <dnnl.hpp>.
#pragma once

#include <dnnl.hpp>

#include <string>

namespace tandem::cpu {

/// One engine for the whole process (creating one is cheap but not free; sharing is thread-safe).
const dnnl::engine& dnnl_engine();

/// A plain user-format memory over `data` (which may be null and set later by set_data_handle).
dnnl::memory dnnl_user_memory(const dnnl::memory::desc& desc, void* data);

}  // namespace tandem::cpu
