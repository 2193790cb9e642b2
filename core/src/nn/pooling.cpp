#include "nn/pooling.hpp"

#include <unordered_map>

#include "backend/cpu/dnnl_engine.hpp"
#include "backend/cpu/parallel.hpp"
#include "nn/activation_fn.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
using Args = std::unordered_map<int, memory>;

}  // namespace

// The forward and backward primitives of one batch size; src/dst/diff memories wrap the layer's
// tensors (handles set before each execution), the workspace (max pooling's argmax) is oneDNN's.
struct Pooling2D::Primitives {
  dnnl::stream stream;
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  memory src, dst, diff_src, diff_dst, workspace, fwd_scratch, bwd_scratch;
  Args fwd_args, bwd_args;
};

Pooling2D::Pooling2D(std::string name, Pooling2DOptions options)
    : Layer(std::move(name)), options_(options) {}

Pooling2D::~Pooling2D() = default;

std::string Pooling2D::class_name() const {
  return options_.kind == PoolKind::max ? "MaxPooling2D" : "AveragePooling2D";
}

void Pooling2D::fail(const char* what, const std::exception& e) const {
  throw RunError("layer '" + name() + "' (" + class_name() + "): oneDNN " + what +
                 " failed for input (" + std::to_string(last_batch_) + ", " +
                 std::to_string(input_shape_[0]) + ", " + std::to_string(input_shape_[1]) + ", " +
                 std::to_string(input_shape_[2]) + "): " + e.what());
}

Shape Pooling2D::build(const Shape& input_shape, Rng& /*init*/) {
  const std::string who = "layer '" + name() + "' (" + class_name() + ")";
  check_image_shape(input_shape, who);
  const Pair& k = options_.pool_size;
  const Pair& s = options_.strides;
  if (k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0)
    throw ShapeError(who + " needs positive pool_size and strides");
  rows_ = window_along(input_shape[0], k[0], s[0], 1, options_.padding);
  cols_ = window_along(input_shape[1], k[1], s[1], 1, options_.padding);
  if (rows_.out <= 0 || cols_.out <= 0)
    throw ShapeError(who + ": pool_size " + shape_to_string({k[0], k[1]}) +
                     " is larger than its input " + shape_to_string(input_shape, true) +
                     " with \"valid\" padding");
  input_shape_ = input_shape;
  cache_.clear();
  return {rows_.out, cols_.out, input_shape[2]};
}

Pooling2D::Primitives& Pooling2D::primitives(std::int64_t batch) {
  const int threads = cpu::compute_threads();  // oneDNN plans its work for this team size
  const auto key = std::make_pair(batch, threads);
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  auto p = std::make_unique<Primitives>();
  try {
    const auto& engine = cpu::dnnl_engine();
    const std::int64_t channels = input_shape_[2];
    memory::desc src_md({batch, channels, input_shape_[0], input_shape_[1]}, kF32, Tag::nhwc);
    memory::desc dst_md({batch, channels, rows_.out, cols_.out}, kF32, Tag::nhwc);
    const memory::dims strides{options_.strides[0], options_.strides[1]};
    const memory::dims kernel{options_.pool_size[0], options_.pool_size[1]};
    const memory::dims pad_l{rows_.pad_before, cols_.pad_before};
    const memory::dims pad_r{rows_.pad_after, cols_.pad_after};
    const auto algorithm = options_.kind == PoolKind::max
                               ? dnnl::algorithm::pooling_max
                               : dnnl::algorithm::pooling_avg_exclude_padding;
    const dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
    p->stream = dnnl::stream(engine);
    // forward_training even at inference: max pooling then always leaves the workspace its
    // backward needs (writing it costs next to nothing).
    p->fwd_pd = dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, algorithm, src_md, dst_md,
                                    strides, kernel, pad_l, pad_r),
        attr, engine);
    p->fwd = dnnl::pooling_forward(p->fwd_pd);
    dnnl::pooling_backward::primitive_desc bwd_pd(
        dnnl::pooling_backward::desc(algorithm, src_md, dst_md, strides, kernel, pad_l, pad_r),
        attr, engine, p->fwd_pd);
    p->bwd = dnnl::pooling_backward(bwd_pd);
    p->src = cpu::dnnl_user_memory(src_md, nullptr);
    p->dst = cpu::dnnl_user_memory(dst_md, nullptr);
    p->diff_src = cpu::dnnl_user_memory(src_md, nullptr);
    p->diff_dst = cpu::dnnl_user_memory(dst_md, nullptr);
    p->fwd_scratch = cpu::dnnl_user_memory(p->fwd_pd.scratchpad_desc(), nullptr);
    p->bwd_scratch = cpu::dnnl_user_memory(bwd_pd.scratchpad_desc(), nullptr);
    p->fwd_args = {
        {DNNL_ARG_SRC, p->src}, {DNNL_ARG_DST, p->dst}, {DNNL_ARG_SCRATCHPAD, p->fwd_scratch}};
    p->bwd_args = {{DNNL_ARG_DIFF_DST, p->diff_dst},
                   {DNNL_ARG_DIFF_SRC, p->diff_src},
                   {DNNL_ARG_SCRATCHPAD, p->bwd_scratch}};
    if (p->fwd_pd.workspace_desc().get_size() > 0) {
      p->workspace = memory(p->fwd_pd.workspace_desc(), engine);
      p->fwd_args.emplace(DNNL_ARG_WORKSPACE, p->workspace);
      p->bwd_args.emplace(DNNL_ARG_WORKSPACE, p->workspace);
    }
    const std::size_t bytes =
        std::max(p->fwd_pd.scratchpad_desc().get_size(), bwd_pd.scratchpad_desc().get_size());
    const auto floats = static_cast<std::int64_t>(bytes / sizeof(float) + 1);
    if (scratch_.size() < floats) scratch_ = Tensor({floats});
  } catch (const dnnl::error& e) {
    fail("pooling set-up", e);
  }
  return *cache_.emplace(key, std::move(p)).first->second;
}

const Tensor& Pooling2D::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() != 4 || x.dim(1) != input_shape_[0] || x.dim(2) != input_shape_[1] ||
      x.dim(3) != input_shape_[2])
    throw ShapeError("layer '" + name() + "' (" + class_name() + ") expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  const std::int64_t batch = x.dim(0);
  last_batch_ = batch;
  output_.resize({batch, rows_.out, cols_.out, input_shape_[2]});
  if (batch == 0) return output_;
  Primitives& p = primitives(batch);
  try {
    p.src.set_data_handle(const_cast<float*>(x.data()));
    p.dst.set_data_handle(output_.data());
    p.fwd_scratch.set_data_handle(scratch_.data());
    p.fwd.execute(p.stream, p.fwd_args);
    p.stream.wait();
  } catch (const dnnl::error& e) {
    fail("forward pooling", e);
  }
  // relu(max z) = max relu(z): the previous layer's relu, on the pooled tensor (NaN stays NaN).
  if (input_relu_)
    activation_forward(ActivationKind::relu, output_.data(), output_.data(),
                       output_.size() / input_shape_[2], input_shape_[2]);
  return output_;
}

const Tensor& Pooling2D::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = last_batch_;
  if (batch < 0 || grad_output.rank() != 4 || grad_output.dim(0) != batch ||
      grad_output.dim(1) != rows_.out || grad_output.dim(2) != cols_.out ||
      grad_output.dim(3) != input_shape_[2])
    throw ShapeError("layer '" + name() + "' (" + class_name() + "): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string({batch, rows_.out, cols_.out, input_shape_[2]}));
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  grad_input_.resize({batch, input_shape_[0], input_shape_[1], input_shape_[2]});
  if (batch == 0) return grad_input_;
  const float* g = grad_output.data();
  if (input_relu_) {
    // Each input gradient lands on its window's maximum, whose relu is the pooled output:
    // masking by pooled output > 0 is relu's derivative at that element.
    masked_grad_.resize(grad_output.shape());
    const float* y = output_.data();
    float* m = masked_grad_.data();
    cpu::parallel_for(grad_output.size(), 1 << 14, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t k = begin; k < end; ++k) m[k] = y[k] > 0 ? g[k] : 0.0f;
    });
    g = m;
  }
  Primitives& p = primitives(batch);
  try {
    p.diff_dst.set_data_handle(const_cast<float*>(g));
    p.diff_src.set_data_handle(grad_input_.data());
    p.bwd_scratch.set_data_handle(scratch_.data());
    p.bwd.execute(p.stream, p.bwd_args);
    p.stream.wait();
  } catch (const dnnl::error& e) {
    fail("backward pooling", e);
  }
  return grad_input_;
}

nlohmann::json Pooling2D::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"pool_size", pair_json(options_.pool_size)},
          {"padding", padding_name(options_.padding)},
          {"strides", pair_json(options_.strides)},
          {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
