// Private (CUDA module): CudnnConvolution (see cudnn_convolution.hpp) on cuDNN's legacy
// convolution API: the handles and workspaces shared per allocator and stream, the per-batch
// descriptors and algorithm searches, and the three operations. Ownership and thread-safety as the
// class; the registry of shared handles is guarded by a mutex (each replica may build its layers
// on a thread of its own).
#include "cuda/ops/cudnn_convolution.hpp"

#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/ops/cuda_check.hpp"
#include "tandem/error.hpp"

// cuDNN 9 marks its whole legacy convolution API deprecated (cudnn_cnn.h and cudnn_ops.h: the
// filter and convolution descriptors, cudnnFind*AlgorithmEx, cudnnConvolutionForward /
// BackwardData / BackwardFilter, their perf structs) in favour of the graph API, which has no
// algorithm search of its own; the attributes warn when CUDNN_WARN_DEPRECATED is defined. The
// legacy API still works in cuDNN 9 and this file is its only user, so -Wdeprecated-declarations
// is silenced here, for this file alone.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace tandem::cuda {

namespace {

constexpr std::int64_t kMaxElements = INT_MAX;  // cuDNN's legacy descriptors count in int
constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;  // beta = 0: outputs overwritten, never read (NaN-safe)

/// Throws RunError("cuDNN <what> failed: <reason> (status N): <cuDNN's detail>") unless s is
/// CUDNN_STATUS_SUCCESS.
void check_cudnn(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string message = std::string("cuDNN ") + what + " failed: " + cudnnGetErrorString(s) +
                        " (status " + std::to_string(static_cast<int>(s)) + ")";
  if (detail[0] != '\0') message += ": " + std::string(detail);
  throw RunError(message);
}

/// Whether s is in cuDNN 9's NOT_SUPPORTED category (3000-3999): the request is valid but cuDNN
/// (or the machine) cannot run it.
bool not_supported(cudnnStatus_t s) {
  return static_cast<int>(s) / 1000 * 1000 == static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED);
}

/// Reads (and so clears) cuDNN's last error message: after calls whose failure is expected
/// (asking an algorithm's workspace that it cannot run), so it is not blamed on a later one.
void drain_cudnn_error() {
  char ignored[256];
  cudnnGetLastErrorString(ignored, sizeof ignored);
}

int as_int(std::int64_t v) {
  return static_cast<int>(v);
}

std::int64_t out_length(std::int64_t in, std::int64_t pad_before, std::int64_t pad_after,
                        std::int64_t kernel, std::int64_t stride, std::int64_t dilation) {
  const std::int64_t span = (kernel - 1) * dilation + 1;
  const std::int64_t padded = in + pad_before + pad_after;
  return padded >= span && stride > 0 ? (padded - span) / stride + 1 : 0;
}

std::string pair_text(std::int64_t a, std::int64_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

std::string ms_text(float ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ms));
  return buf;
}

// One cuDNN handle per allocator and stream (per replica), bound to that stream, and the workspace
// every convolution on it shares: they run one after another in stream order, so one workspace
// of the largest chosen size serves them all.
struct SharedHandle {
  cudnnHandle_t handle = nullptr;
  DeviceAllocator* allocator = nullptr;
  DeviceBuffer workspace;

  SharedHandle() = default;
  SharedHandle(const SharedHandle&) = delete;
  SharedHandle& operator=(const SharedHandle&) = delete;
  ~SharedHandle() {
    workspace.reset();
    if (handle) {
      cudaSetDevice(allocator->device());
      cudnnDestroy(handle);
    }
  }
  /// At least `bytes` of workspace; grows only (after a search chose an algorithm that needs more,
  /// which happens only in the first step of a batch size).
  void reserve(std::size_t bytes) {
    const auto floats = static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
    if (floats > workspace.size()) workspace.resize(*allocator, floats);
  }
  void* workspace_data() { return workspace.data(); }
  std::size_t workspace_bytes() const {
    return static_cast<std::size_t>(workspace.size()) * sizeof(float);
  }
};

std::shared_ptr<SharedHandle> shared_handle(DeviceAllocator& allocator, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<const DeviceAllocator*, cudaStream_t>, std::weak_ptr<SharedHandle>>
      handles;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = handles.begin(); it != handles.end();)
    it = it->second.expired() ? handles.erase(it) : std::next(it);
  std::weak_ptr<SharedHandle>& slot = handles[{&allocator, stream}];
  if (std::shared_ptr<SharedHandle> existing = slot.lock()) return existing;
  auto created = std::make_shared<SharedHandle>();
  created->allocator = &allocator;
  check(cudaSetDevice(allocator.device()), "cudaSetDevice (cuDNN handle)");
  check_cudnn(cudnnCreate(&created->handle), "cudnnCreate");
  check_cudnn(cudnnSetStream(created->handle, stream), "cudnnSetStream");
  slot = created;
  return created;
}

/// One operation's algorithm for one batch size.
struct Choice {
  bool searched = false;
  bool found = false;
  int algorithm = -1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  float ms = -1.0f;           // what the search measured
  std::size_t workspace = 0;  // bytes it needs
  std::string why_none;       // when searched and not found
};

/// The fastest of cuDNN's search results (sorted by time) that ran, is deterministic, fits the
/// workspace cap and keeps the precision: fp32 takes no tensor-op result (its descriptor says
/// CUDNN_FMA_MATH anyway), neither precision one that converts float to half.
template <class Perf>
Choice pick(const std::vector<Perf>& results, int returned, Precision precision) {
  Choice c;
  c.searched = true;
  int ran = 0, deterministic = 0;
  for (int i = 0; i < returned; ++i) {
    const Perf& r = results[static_cast<std::size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS) continue;
    ++ran;
    if (r.determinism != CUDNN_DETERMINISTIC) continue;
    ++deterministic;
    if (r.memory > CudnnConvolution::kMaxWorkspaceBytes) continue;
    if (r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    if (precision == Precision::fp32 && r.mathType == CUDNN_TENSOR_OP_MATH) continue;
    c.found = true;
    c.algorithm = static_cast<int>(r.algo);
    c.math = precision == Precision::fp32 ? CUDNN_FMA_MATH : r.mathType;
    c.ms = r.time;
    c.workspace = r.memory;
    return c;
  }
  c.why_none = "of its " + std::to_string(returned) + " algorithms " + std::to_string(ran) +
               " ran and " + std::to_string(deterministic) +
               " are deterministic, none of those within " +
               format_bytes(CudnnConvolution::kMaxWorkspaceBytes) + " of workspace" +
               (precision == Precision::fp32 ? " and without tensor-op math" : "");
  return c;
}

/// The descriptors of one batch size and the three operations' choices for it.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  Choice forward, backward_data, backward_filter;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
  }
};

}  // namespace

struct CudnnConvolution::Impl {
  const CudnnConvolution& owner;
  std::shared_ptr<SharedHandle> shared;
  cudaStream_t stream = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t convolution = nullptr;
  cudnnMathType_t search_math = CUDNN_FMA_MATH;   // the precision's: what searches run with
  cudnnMathType_t current_math = CUDNN_FMA_MATH;  // what the descriptor says now
  std::map<std::int64_t, std::unique_ptr<Plan>> plans;

  explicit Impl(const CudnnConvolution& o) : owner(o) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    plans.clear();
    if (convolution) cudnnDestroyConvolutionDescriptor(convolution);
    if (filter) cudnnDestroyFilterDescriptor(filter);
  }

  cudnnHandle_t handle() const { return shared->handle; }
  const Geometry& g() const { return owner.geometry_; }

  void use_math(cudnnMathType_t math) {
    if (math == current_math) return;
    check_cudnn(cudnnSetConvolutionMathType(convolution, math), "cudnnSetConvolutionMathType");
    current_math = math;
  }

  const Plan* find_plan(std::int64_t batch) const {
    const auto it = plans.find(batch);
    return it == plans.end() ? nullptr : it->second.get();
  }

  // The descriptors of `batch` (made the first time: host calls only).
  Plan& plan(std::int64_t batch) {
    if (const auto it = plans.find(batch); it != plans.end()) return *it->second;
    if (batch <= 0 || batch > max_batch(g()))
      throw RunError("cuDNN " + owner.describe() + ": a batch of " + std::to_string(batch) +
                     " samples is outside what cuDNN can describe (1 to " +
                     std::to_string(max_batch(g())) + ")");
    auto p = std::make_unique<Plan>();
    check_cudnn(cudnnCreateTensorDescriptor(&p->x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&p->y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, as_int(batch),
                                           as_int(g().in_channels), as_int(g().in_rows),
                                           as_int(g().in_cols)),
                "cudnnSetTensor4dDescriptor (input)");
    int n = 0, c = 0, h = 0, w = 0;
    check_cudnn(cudnnGetConvolution2dForwardOutputDim(convolution, p->x, filter, &n, &c, &h, &w),
                "cudnnGetConvolution2dForwardOutputDim");
    if (n != batch || c != g().filters || h != g().out_rows() || w != g().out_cols())
      throw RunError("cuDNN " + owner.describe() + ": cuDNN computes an output of " +
                     std::to_string(n) + "x" + std::to_string(h) + "x" + std::to_string(w) + "x" +
                     std::to_string(c) + ", expected " + std::to_string(batch) + "x" +
                     std::to_string(g().out_rows()) + "x" + std::to_string(g().out_cols()) + "x" +
                     std::to_string(g().filters));
    check_cudnn(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w),
                "cudnnSetTensor4dDescriptor (output)");
    return *plans.emplace(batch, std::move(p)).first->second;
  }

  // Before a search: refuses inside a CUDA graph capture (the search synchronizes and times), then
  // waits for the stream so the buffers hold what the queued work writes into them.
  void begin_search() {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
    if (capture != cudaStreamCaptureStatusNone)
      throw RunError("cuDNN " + owner.describe() +
                     ": the algorithm search cannot run while the stream is captured into a CUDA "
                     "graph (it belongs to the first, uncaptured step of a batch size)");
    check(cudaSetDevice(shared->allocator->device()), "cudaSetDevice (cuDNN search)");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (before cuDNN's algorithm search)");
    use_math(search_math);
  }

  // After a search: waits for it (cudnnFind*Ex blocks, but its scratch goes back to the cache
  // next), notes the workspace the choice needs (its own report or the workspace query, the
  // larger; reserved by the operation's first call, so a choice that never runs holds none) and
  // returns whether there was one.
  template <class WorkspaceQuery>
  bool end_search(Choice& choice, const WorkspaceQuery& query) {
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after cuDNN's algorithm search)");
    if (!choice.found) return false;
    use_math(choice.math);
    std::size_t bytes = 0;
    check_cudnn(query(choice.algorithm, &bytes), "workspace size query of the chosen algorithm");
    choice.workspace = std::max(choice.workspace, bytes);
    return true;
  }

  // Before an operation: its algorithm (searched on these buffers the first time), its math and
  // its workspace (grown only the first time it runs with a larger need).
  void prepare(const Choice& c, const char* op, std::int64_t batch) {
    require(c, op, batch);
    use_math(c.math);
    shared->reserve(c.workspace);
  }

  /// Scratch for a search: the most workspace any algorithm asks (within the cap), so that each
  /// is tried; `query(algorithm, &bytes)` asks one.
  template <class WorkspaceQuery>
  DeviceBuffer search_scratch(int algorithms, const WorkspaceQuery& query, std::size_t* bytes) {
    std::size_t most = 0;
    for (int a = 0; a < algorithms; ++a) {
      std::size_t b = 0;
      if (query(a, &b) == CUDNN_STATUS_SUCCESS && b <= kMaxWorkspaceBytes) most = std::max(most, b);
    }
    drain_cudnn_error();  // algorithms that cannot run this geometry answer with an error
    *bytes = most;
    DeviceBuffer scratch;
    if (most > 0)
      scratch.resize(*shared->allocator,
                     static_cast<std::int64_t>((most + sizeof(float) - 1) / sizeof(float)));
    return scratch;
  }

  // What a failed search says, or throws when it failed for another reason than "not supported".
  static std::string search_failure(cudnnStatus_t s, const char* what) {
    if (!not_supported(s)) check_cudnn(s, what);
    const std::string why = std::string(what) + " answered " + cudnnGetErrorString(s);
    drain_cudnn_error();
    return why;
  }

  bool find_forward(const float* x, const float* w, float* y, std::int64_t batch) {
    Plan& p = plan(batch);
    if (p.forward.searched) return p.forward.found;
    begin_search();
    const auto query = [&](int algorithm, std::size_t* bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(
          handle(), p.x, filter, convolution, p.y,
          static_cast<cudnnConvolutionFwdAlgo_t>(algorithm), bytes);
    };
    std::size_t bytes = 0;
    DeviceBuffer scratch = search_scratch(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, query, &bytes);
    int count = 0;
    check_cudnn(cudnnGetConvolutionForwardAlgorithmMaxCount(handle(), &count),
                "cudnnGetConvolutionForwardAlgorithmMaxCount");
    std::vector<cudnnConvolutionFwdAlgoPerf_t> results(
        static_cast<std::size_t>(std::max(count, 1)));
    int returned = 0;
    const cudnnStatus_t s = cudnnFindConvolutionForwardAlgorithmEx(
        handle(), p.x, x, filter, w, convolution, p.y, y, count, &returned, results.data(),
        scratch.data(), bytes);
    if (s == CUDNN_STATUS_SUCCESS) {
      p.forward = pick(results, returned, owner.precision_);
    } else {
      p.forward = Choice{};
      p.forward.searched = true;
      p.forward.why_none = search_failure(s, "cudnnFindConvolutionForwardAlgorithmEx");
    }
    return end_search(p.forward, query);
  }

  bool find_backward_data(const float* dy, const float* w, float* dx, std::int64_t batch) {
    Plan& p = plan(batch);
    if (p.backward_data.searched) return p.backward_data.found;
    begin_search();
    const auto query = [&](int algorithm, std::size_t* bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle(), filter, p.y, convolution, p.x,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm), bytes);
    };
    std::size_t bytes = 0;
    DeviceBuffer scratch = search_scratch(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, query, &bytes);
    int count = 0;
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle(), &count),
                "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> results(
        static_cast<std::size_t>(std::max(count, 1)));
    int returned = 0;
    const cudnnStatus_t s = cudnnFindConvolutionBackwardDataAlgorithmEx(
        handle(), filter, w, p.y, dy, convolution, p.x, dx, count, &returned, results.data(),
        scratch.data(), bytes);
    if (s == CUDNN_STATUS_SUCCESS) {
      p.backward_data = pick(results, returned, owner.precision_);
    } else {
      p.backward_data = Choice{};
      p.backward_data.searched = true;
      p.backward_data.why_none = search_failure(s, "cudnnFindConvolutionBackwardDataAlgorithmEx");
    }
    return end_search(p.backward_data, query);
  }

  bool find_backward_filter(const float* x, const float* dy, float* dw, std::int64_t batch) {
    Plan& p = plan(batch);
    if (p.backward_filter.searched) return p.backward_filter.found;
    begin_search();
    const auto query = [&](int algorithm, std::size_t* bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle(), p.x, p.y, convolution, filter,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm), bytes);
    };
    std::size_t bytes = 0;
    DeviceBuffer scratch = search_scratch(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, query, &bytes);
    int count = 0;
    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle(), &count),
                "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> results(
        static_cast<std::size_t>(std::max(count, 1)));
    int returned = 0;
    const cudnnStatus_t s = cudnnFindConvolutionBackwardFilterAlgorithmEx(
        handle(), p.x, x, p.y, dy, convolution, filter, dw, count, &returned, results.data(),
        scratch.data(), bytes);
    if (s == CUDNN_STATUS_SUCCESS) {
      p.backward_filter = pick(results, returned, owner.precision_);
    } else {
      p.backward_filter = Choice{};
      p.backward_filter.searched = true;
      p.backward_filter.why_none =
          search_failure(s, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    }
    return end_search(p.backward_filter, query);
  }

  // Throws RunError when the search of `op` for `batch` found nothing.
  void require(const Choice& c, const char* op, std::int64_t batch) const {
    if (c.found) return;
    throw RunError("cuDNN " + owner.describe() + ": no usable " + op +
                   " algorithm for a batch of " + std::to_string(batch) + " samples (" +
                   c.why_none + ")");
  }
};

std::int64_t CudnnConvolution::Geometry::out_rows() const {
  return out_length(in_rows, pad_top, pad_bottom, kernel_rows, stride_rows, dilation_rows);
}

std::int64_t CudnnConvolution::Geometry::out_cols() const {
  return out_length(in_cols, pad_left, pad_right, kernel_cols, stride_cols, dilation_cols);
}

std::string CudnnConvolution::unsupported_reason(const Geometry& g) {
  for (std::int64_t v : {g.in_rows, g.in_cols, g.in_channels, g.kernel_rows, g.kernel_cols,
                         g.filters, g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols})
    if (v <= 0) return "its sizes, strides and dilation are not all positive";
  if (g.pad_top < 0 || g.pad_bottom < 0 || g.pad_left < 0 || g.pad_right < 0)
    return "its padding is negative";
  if (g.pad_top != g.pad_bottom || g.pad_left != g.pad_right)
    return "its padding is not the same on both sides (top " + std::to_string(g.pad_top) +
           ", bottom " + std::to_string(g.pad_bottom) + ", left " + std::to_string(g.pad_left) +
           ", right " + std::to_string(g.pad_right) +
           "): TensorFlow's SAME padding puts the odd row or column after the input when the "
           "total padding is odd (an even kernel, or a stride that leaves one over), and cuDNN "
           "pads both sides equally";
  if (g.out_rows() <= 0 || g.out_cols() <= 0) return "its kernel is larger than its padded input";
  const std::int64_t in = g.in_rows * g.in_cols * g.in_channels;
  const std::int64_t out = g.out_rows() * g.out_cols() * g.filters;
  const std::int64_t filter = g.filters * g.kernel_rows * g.kernel_cols * g.in_channels;
  if (std::max({in, out, filter}) > kMaxElements)
    return "a sample or its filter has 2^31 elements or more, more than cuDNN's legacy API "
           "describes";
  return "";
}

std::int64_t CudnnConvolution::max_batch(const Geometry& g) {
  const std::int64_t in = g.in_rows * g.in_cols * g.in_channels;
  const std::int64_t out = g.out_rows() * g.out_cols() * g.filters;
  const std::int64_t per_sample = std::max<std::int64_t>({in, out, 1});
  return kMaxElements / per_sample;
}

CudnnConvolution::CudnnConvolution(const Geometry& g, DeviceAllocator& allocator,
                                   cudaStream_t stream, Precision precision)
    : geometry_(g), precision_(precision) {
  if (const std::string why = unsupported_reason(g); !why.empty())
    throw RunError("cuDNN cannot compute the " + describe() + ": " + why);
  impl_ = std::make_unique<Impl>(*this);
  Impl& m = *impl_;
  m.stream = stream;
  m.shared = shared_handle(allocator, stream);
  check_cudnn(cudnnCreateFilterDescriptor(&m.filter), "cudnnCreateFilterDescriptor");
  // CUDNN_TENSOR_NHWC for a filter: (filters, kh, kw, in) row-major - KRSC.
  check_cudnn(cudnnSetFilter4dDescriptor(m.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                         as_int(g.filters), as_int(g.in_channels),
                                         as_int(g.kernel_rows), as_int(g.kernel_cols)),
              "cudnnSetFilter4dDescriptor");
  check_cudnn(cudnnCreateConvolutionDescriptor(&m.convolution), "cudnnCreateConvolutionDescriptor");
  check_cudnn(cudnnSetConvolution2dDescriptor(m.convolution, as_int(g.pad_top), as_int(g.pad_left),
                                              as_int(g.stride_rows), as_int(g.stride_cols),
                                              as_int(g.dilation_rows), as_int(g.dilation_cols),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              "cudnnSetConvolution2dDescriptor");
  // fp32: FMA only, no TF32 tensor cores. tf32: cuDNN's default for float data, which lets
  // Ampere and later run TF32 tensor-op kernels (each choice then sets the math of its result).
  m.search_math = precision == Precision::fp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
  check_cudnn(cudnnSetConvolutionMathType(m.convolution, m.search_math),
              "cudnnSetConvolutionMathType");
  m.current_math = m.search_math;
}

CudnnConvolution::~CudnnConvolution() = default;

std::string CudnnConvolution::describe() const {
  const Geometry& g = geometry_;
  std::string padding =
      g.pad_top == g.pad_bottom && g.pad_left == g.pad_right
          ? pair_text(g.pad_top, g.pad_left)
          : "top " + std::to_string(g.pad_top) + " bottom " + std::to_string(g.pad_bottom) +
                " left " + std::to_string(g.pad_left) + " right " + std::to_string(g.pad_right);
  return pair_text(g.kernel_rows, g.kernel_cols) + " convolution (strides " +
         pair_text(g.stride_rows, g.stride_cols) + ", dilation " +
         pair_text(g.dilation_rows, g.dilation_cols) + ", padding " + padding + ") of " +
         pair_text(g.in_rows, g.in_cols) + "x" + std::to_string(g.in_channels) + " inputs into " +
         std::to_string(g.filters) + " filters";
}

bool CudnnConvolution::find_forward(const float* x, const float* w, float* y, std::int64_t batch) {
  return impl_->find_forward(x, w, y, batch);
}

bool CudnnConvolution::find_backward_data(const float* dy, const float* w, float* dx,
                                          std::int64_t batch) {
  return impl_->find_backward_data(dy, w, dx, batch);
}

bool CudnnConvolution::find_backward_filter(const float* x, const float* dy, float* dw,
                                            std::int64_t batch) {
  return impl_->find_backward_filter(x, dy, dw, batch);
}

bool CudnnConvolution::forward_searched(std::int64_t batch) const {
  const Plan* p = impl_->find_plan(batch);
  return p && p->forward.searched;
}

bool CudnnConvolution::backward_searched(std::int64_t batch) const {
  const Plan* p = impl_->find_plan(batch);
  return p && p->backward_data.searched && p->backward_filter.searched;
}

float CudnnConvolution::forward_ms(std::int64_t batch) const {
  const Plan* p = impl_->find_plan(batch);
  return p && p->forward.found ? p->forward.ms : -1.0f;
}

std::string CudnnConvolution::choices(std::int64_t batch) const {
  const Plan* p = impl_->find_plan(batch);
  if (!p) return "not searched";
  const auto text = [](const char* op, const Choice& c) {
    std::string s = std::string(op) + ": ";
    if (!c.searched) return s + "not searched";
    if (!c.found) return s + "none (" + c.why_none + ")";
    return s + "algorithm " + std::to_string(c.algorithm) + " (" + ms_text(c.ms) + ", " +
           format_bytes(c.workspace) + " of workspace)";
  };
  return text("forward", p->forward) + "; " + text("backward data", p->backward_data) + "; " +
         text("backward filter", p->backward_filter);
}

void CudnnConvolution::forward(const float* x, const float* w, float* y, std::int64_t batch) {
  if (batch == 0) return;
  Impl& m = *impl_;
  Plan& p = m.plan(batch);
  if (!p.forward.searched) m.find_forward(x, w, y, batch);
  m.prepare(p.forward, "forward", batch);
  check_cudnn(cudnnConvolutionForward(m.handle(), &kOne, p.x, x, m.filter, w, m.convolution,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(p.forward.algorithm),
                                      m.shared->workspace_data(), m.shared->workspace_bytes(),
                                      &kZero, p.y, y),
              "cudnnConvolutionForward");
}

void CudnnConvolution::backward_data(const float* dy, const float* w, float* dx,
                                     std::int64_t batch) {
  if (batch == 0) return;
  Impl& m = *impl_;
  Plan& p = m.plan(batch);
  if (!p.backward_data.searched) m.find_backward_data(dy, w, dx, batch);
  m.prepare(p.backward_data, "backward data", batch);
  check_cudnn(cudnnConvolutionBackwardData(
                  m.handle(), &kOne, m.filter, w, p.y, dy, m.convolution,
                  static_cast<cudnnConvolutionBwdDataAlgo_t>(p.backward_data.algorithm),
                  m.shared->workspace_data(), m.shared->workspace_bytes(), &kZero, p.x, dx),
              "cudnnConvolutionBackwardData");
}

void CudnnConvolution::backward_filter(const float* x, const float* dy, float* dw,
                                       std::int64_t batch) {
  Impl& m = *impl_;
  if (batch == 0) {  // no samples: a zero gradient
    const Geometry& g = geometry_;
    const auto n =
        static_cast<std::size_t>(g.filters * g.kernel_rows * g.kernel_cols * g.in_channels);
    check(cudaMemsetAsync(dw, 0, n * sizeof(float), m.stream),
          "cudaMemsetAsync (cuDNN filter gradient)");
    return;
  }
  Plan& p = m.plan(batch);
  if (!p.backward_filter.searched) m.find_backward_filter(x, dy, dw, batch);
  m.prepare(p.backward_filter, "backward filter", batch);
  check_cudnn(cudnnConvolutionBackwardFilter(
                  m.handle(), &kOne, p.x, x, p.y, dy, m.convolution,
                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.backward_filter.algorithm),
                  m.shared->workspace_data(), m.shared->workspace_bytes(), &kZero, m.filter, dw),
              "cudnnConvolutionBackwardFilter");
}

}  // namespace tandem::cuda

#pragma GCC diagnostic pop
