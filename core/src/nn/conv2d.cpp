#include "nn/conv2d.hpp"

#include <unordered_map>

#include "backend/cpu/dnnl_engine.hpp"
#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
using Args = std::unordered_map<int, memory>;

}  // namespace

// Everything oneDNN needs for one batch size. The memories wrap the layer's tensors (their
// data handles are set before each execution); `weights`, `diff_weights` and `data_weights` are
// oneDNN-owned buffers in the primitives' preferred kernel layout, used only when that layout is
// not Keras' HWIO.
struct Conv2D::Primitives {
  dnnl::stream stream;
  memory::desc src_md, dst_md, kernel_md, weights_any_md, bias_md;
  memory::dims strides, dilates, pad_l, pad_r;

  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  memory src, dst, kernel, bias, weights, fwd_scratch;
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;  // kernel (HWIO) -> weights
  Args fwd_args, weights_reorder_args;

  bool have_bwd_weights = false;
  dnnl::convolution_backward_weights bwd_weights;
  memory diff_dst, diff_kernel, diff_bias, diff_weights, bwdw_scratch;
  bool reorder_diff_weights = false;
  dnnl::reorder diff_weights_reorder;  // diff_weights -> diff_kernel (HWIO)
  Args bwdw_args, diff_weights_reorder_args;

  bool have_bwd_data = false;
  dnnl::convolution_backward_data bwd_data;
  memory diff_src, data_weights, bwdd_scratch;
  bool reorder_data_weights = false;  // needs its own reorder of the kernel
  dnnl::reorder data_weights_reorder;
  Args bwdd_args, data_weights_reorder_args;
};

Conv2D::Conv2D(std::string name, Conv2DOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  kernel_.name = "kernel";
  bias_.name = "bias";
}

Conv2D::~Conv2D() = default;

void Conv2D::fail(const char* what, const std::exception& e) const {
  throw RunError("layer '" + name() + "' (Conv2D): oneDNN " + what + " failed for input " +
                 shape_to_string(input_.shape()) + ": " + e.what());
}

Shape Conv2D::build(const Shape& input_shape, Rng& init) {
  const std::string who = "layer '" + name() + "' (Conv2D)";
  check_image_shape(input_shape, who);
  const Pair& k = options_.kernel_size;
  const Pair& s = options_.strides;
  const Pair& d = options_.dilation_rate;
  if (options_.filters <= 0 || k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0 || d[0] <= 0 ||
      d[1] <= 0)
    throw ShapeError(who + " needs positive filters, kernel_size, strides and dilation_rate");
  rows_ = window_along(input_shape[0], k[0], s[0], d[0], options_.padding);
  cols_ = window_along(input_shape[1], k[1], s[1], d[1], options_.padding);
  if (rows_.out <= 0 || cols_.out <= 0)
    throw ShapeError(
        who + ": kernel " + shape_to_string({k[0], k[1]}) +
        (d[0] > 1 || d[1] > 1 ? " with dilation " + shape_to_string({d[0], d[1]}) : "") +
        " is larger than its input " + shape_to_string(input_shape, true) +
        " with \"valid\" padding");
  input_shape_ = input_shape;
  const std::int64_t in = input_shape[2], filters = options_.filters;
  output_shape_ = {rows_.out, cols_.out, filters};
  kernel_.value = Tensor({k[0], k[1], in, filters});
  kernel_.grad = Tensor({k[0], k[1], in, filters});
  // Keras: fan_in = receptive field * input channels, fan_out = receptive field * filters.
  const std::int64_t field = k[0] * k[1];
  options_.kernel_initializer.fill(kernel_.value, field * in, field * filters, init);
  if (options_.use_bias) {
    bias_.value = Tensor({filters});
    bias_.grad = Tensor({filters});
    options_.bias_initializer.fill(bias_.value, field * in, field * filters, init);
  }
  cache_.clear();
  return output_shape_;
}

Conv2D::Primitives& Conv2D::primitives(std::int64_t batch) {
  const int threads = cpu::compute_threads();  // oneDNN plans its work for this team size
  const auto key = std::make_pair(batch, threads);
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  auto p = std::make_unique<Primitives>();
  try {
    const auto& engine = cpu::dnnl_engine();
    const std::int64_t in = input_shape_[2], filters = options_.filters;
    const Pair& k = options_.kernel_size;
    p->stream = dnnl::stream(engine);
    // oneDNN's logical dims are always (N, C, H, W) / (O, I, H, W); the tags give the layouts.
    p->src_md = memory::desc({batch, in, input_shape_[0], input_shape_[1]}, kF32, Tag::nhwc);
    p->dst_md = memory::desc({batch, filters, rows_.out, cols_.out}, kF32, Tag::nhwc);
    p->kernel_md = memory::desc({filters, in, k[0], k[1]}, kF32, Tag::hwio);
    p->weights_any_md = memory::desc({filters, in, k[0], k[1]}, kF32, Tag::any);
    if (options_.use_bias) p->bias_md = memory::desc({filters}, kF32, Tag::a);
    p->strides = {options_.strides[0], options_.strides[1]};
    p->dilates = {options_.dilation_rate[0] - 1, options_.dilation_rate[1] - 1};
    p->pad_l = {rows_.pad_before, cols_.pad_before};
    p->pad_r = {rows_.pad_after, cols_.pad_after};

    auto desc =
        options_.use_bias
            ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                              dnnl::algorithm::convolution_direct, p->src_md,
                                              p->weights_any_md, p->bias_md, p->dst_md, p->strides,
                                              p->dilates, p->pad_l, p->pad_r)
            : dnnl::convolution_forward::desc(
                  dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, p->src_md,
                  p->weights_any_md, p->dst_md, p->strides, p->dilates, p->pad_l, p->pad_r);
    // relu is not a oneDNN post-op here: oneDNN 2.6's fused relu turns NaN into 0, and a NaN
    // must survive relu (Tandem's NaN policy; tests/core/nn/conv2d_test.cpp checks it).
    p->fwd_pd =
        dnnl::convolution_forward::primitive_desc(desc, cpu::dnnl_user_scratchpad(), engine);
    p->fwd = dnnl::convolution_forward(p->fwd_pd);
    p->src = cpu::dnnl_user_memory(p->src_md, nullptr);
    p->dst = cpu::dnnl_user_memory(p->dst_md, nullptr);
    p->kernel = cpu::dnnl_user_memory(p->kernel_md, nullptr);
    p->reorder_weights = p->fwd_pd.weights_desc() != p->kernel_md;
    if (p->reorder_weights) {
      p->weights = memory(p->fwd_pd.weights_desc(), engine);
      p->weights_reorder = dnnl::reorder(p->kernel, p->weights);
      p->weights_reorder_args = {{DNNL_ARG_FROM, p->kernel}, {DNNL_ARG_TO, p->weights}};
    } else {
      p->weights = p->kernel;
    }
    p->fwd_scratch = cpu::dnnl_user_memory(p->fwd_pd.scratchpad_desc(), nullptr);
    p->fwd_args = {{DNNL_ARG_SRC, p->src},
                   {DNNL_ARG_WEIGHTS, p->weights},
                   {DNNL_ARG_DST, p->dst},
                   {DNNL_ARG_SCRATCHPAD, p->fwd_scratch}};
    if (options_.use_bias) {
      p->bias = cpu::dnnl_user_memory(p->bias_md, nullptr);
      p->fwd_args.emplace(DNNL_ARG_BIAS, p->bias);
    }
    const auto scratch_floats =
        static_cast<std::int64_t>(p->fwd_pd.scratchpad_desc().get_size() / sizeof(float) + 1);
    if (scratch_.size() < scratch_floats) scratch_ = Tensor({scratch_floats});
  } catch (const dnnl::error& e) {
    fail("set-up of the forward convolution", e);
  }
  return *cache_.emplace(key, std::move(p)).first->second;
}

void Conv2D::prepare_backward(Primitives& p, bool need_data) {
  const auto& engine = cpu::dnnl_engine();
  try {
    if (!p.have_bwd_weights) {
      auto desc = options_.use_bias
                      ? dnnl::convolution_backward_weights::desc(
                            dnnl::algorithm::convolution_direct, p.src_md, p.weights_any_md,
                            p.bias_md, p.dst_md, p.strides, p.dilates, p.pad_l, p.pad_r)
                      : dnnl::convolution_backward_weights::desc(
                            dnnl::algorithm::convolution_direct, p.src_md, p.weights_any_md,
                            p.dst_md, p.strides, p.dilates, p.pad_l, p.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, cpu::dnnl_user_scratchpad(),
                                                            engine, p.fwd_pd);
      p.bwd_weights = dnnl::convolution_backward_weights(pd);
      p.diff_dst = cpu::dnnl_user_memory(p.dst_md, nullptr);
      p.diff_kernel = cpu::dnnl_user_memory(p.kernel_md, nullptr);
      p.reorder_diff_weights = pd.diff_weights_desc() != p.kernel_md;
      if (p.reorder_diff_weights) {
        p.diff_weights = memory(pd.diff_weights_desc(), engine);
        p.diff_weights_reorder = dnnl::reorder(p.diff_weights, p.diff_kernel);
        p.diff_weights_reorder_args = {{DNNL_ARG_FROM, p.diff_weights},
                                       {DNNL_ARG_TO, p.diff_kernel}};
      } else {
        p.diff_weights = p.diff_kernel;
      }
      p.bwdw_scratch = cpu::dnnl_user_memory(pd.scratchpad_desc(), nullptr);
      p.bwdw_args = {{DNNL_ARG_SRC, p.src},
                     {DNNL_ARG_DIFF_DST, p.diff_dst},
                     {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights},
                     {DNNL_ARG_SCRATCHPAD, p.bwdw_scratch}};
      if (options_.use_bias) {
        p.diff_bias = cpu::dnnl_user_memory(p.bias_md, nullptr);
        p.bwdw_args.emplace(DNNL_ARG_DIFF_BIAS, p.diff_bias);
      }
      const auto floats =
          static_cast<std::int64_t>(pd.scratchpad_desc().get_size() / sizeof(float) + 1);
      if (scratch_.size() < floats) scratch_ = Tensor({floats});
      p.have_bwd_weights = true;
    }
    if (need_data && !p.have_bwd_data) {
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, p.src_md,
                                                 p.weights_any_md, p.dst_md, p.strides, p.dilates,
                                                 p.pad_l, p.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, cpu::dnnl_user_scratchpad(), engine,
                                                         p.fwd_pd);
      p.bwd_data = dnnl::convolution_backward_data(pd);
      p.diff_src = cpu::dnnl_user_memory(p.src_md, nullptr);
      // The forward already holds the kernel in its layout; reorder again only if backward-data
      // wants yet another one.
      if (pd.weights_desc() == p.weights.get_desc()) {
        p.data_weights = p.weights;
      } else if (pd.weights_desc() == p.kernel_md) {
        p.data_weights = p.kernel;
      } else {
        p.reorder_data_weights = true;
        p.data_weights = memory(pd.weights_desc(), engine);
        p.data_weights_reorder = dnnl::reorder(p.kernel, p.data_weights);
        p.data_weights_reorder_args = {{DNNL_ARG_FROM, p.kernel}, {DNNL_ARG_TO, p.data_weights}};
      }
      p.bwdd_scratch = cpu::dnnl_user_memory(pd.scratchpad_desc(), nullptr);
      p.bwdd_args = {{DNNL_ARG_DIFF_DST, p.diff_dst},
                     {DNNL_ARG_WEIGHTS, p.data_weights},
                     {DNNL_ARG_DIFF_SRC, p.diff_src},
                     {DNNL_ARG_SCRATCHPAD, p.bwdd_scratch}};
      const auto floats =
          static_cast<std::int64_t>(pd.scratchpad_desc().get_size() / sizeof(float) + 1);
      if (scratch_.size() < floats) scratch_ = Tensor({floats});
      p.have_bwd_data = true;
    }
  } catch (const dnnl::error& e) {
    fail("set-up of the backward convolution", e);
  }
}

const Tensor& Conv2D::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() != 4 || x.dim(1) != input_shape_[0] || x.dim(2) != input_shape_[1] ||
      x.dim(3) != input_shape_[2])
    throw ShapeError("layer '" + name() + "' (Conv2D) expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  input_ = x;
  const std::int64_t batch = x.dim(0), filters = options_.filters;
  const Shape out_shape{batch, rows_.out, cols_.out, filters};
  const ActivationKind act = options_.activation;
  // relu's derivative reads only the sign, which its output keeps: it runs in place.
  const bool keep_pre = act != ActivationKind::linear && act != ActivationKind::relu;
  Tensor& z = keep_pre ? pre_ : output_;
  z.resize(out_shape);
  output_.resize(out_shape);
  if (batch == 0) return output_;
  Primitives& p = primitives(batch);
  try {
    p.src.set_data_handle(const_cast<float*>(x.data()));
    p.dst.set_data_handle(z.data());
    p.kernel.set_data_handle(kernel_.value.data());
    if (options_.use_bias) p.bias.set_data_handle(bias_.value.data());
    p.fwd_scratch.set_data_handle(scratch_.data());
    if (p.reorder_weights) p.weights_reorder.execute(p.stream, p.weights_reorder_args);
    p.fwd.execute(p.stream, p.fwd_args);
    p.stream.wait();
  } catch (const dnnl::error& e) {
    fail("forward convolution", e);
  }
  if (act != ActivationKind::linear && !(act == ActivationKind::relu && relu_external_))
    activation_forward(act, z.data(), output_.data(), batch * rows_.out * cols_.out, filters);
  return output_;
}

const Tensor& Conv2D::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = input_.rank() == 4 ? input_.dim(0) : 0;
  const std::int64_t filters = options_.filters;
  const std::int64_t rows = batch * rows_.out * cols_.out;
  if (input_.rank() != 4 || grad_output.rank() != 4 || grad_output.dim(0) != batch ||
      grad_output.dim(1) != rows_.out || grad_output.dim(2) != cols_.out ||
      grad_output.dim(3) != filters)
    throw ShapeError("layer '" + name() + "' (Conv2D): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string({batch, rows_.out, cols_.out, filters}));
  if (batch == 0) {  // no samples: zero gradients
    kernel_.grad.fill(0.0f);
    if (options_.use_bias) bias_.grad.fill(0.0f);
    if (!need_input_grad) {
      grad_input_ = Tensor();
      return grad_input_;
    }
    grad_input_.resize(input_.shape());
    return grad_input_;
  }
  const float* g = grad_output.data();
  const ActivationKind act = options_.activation;
  if (act != ActivationKind::linear && !(act == ActivationKind::relu && relu_external_)) {
    grad_pre_.resize(grad_output.shape());
    const float* pre = act == ActivationKind::relu ? output_.data() : pre_.data();
    activation_backward(act, pre, output_.data(), g, grad_pre_.data(), rows, filters);
    g = grad_pre_.data();
  }
  Primitives& p = primitives(batch);
  prepare_backward(p, need_input_grad);
  try {
    p.src.set_data_handle(const_cast<float*>(input_.data()));
    p.diff_dst.set_data_handle(const_cast<float*>(g));
    p.diff_kernel.set_data_handle(kernel_.grad.data());
    if (options_.use_bias) p.diff_bias.set_data_handle(bias_.grad.data());
    p.bwdw_scratch.set_data_handle(scratch_.data());
    p.bwd_weights.execute(p.stream, p.bwdw_args);
    if (p.reorder_diff_weights)
      p.diff_weights_reorder.execute(p.stream, p.diff_weights_reorder_args);
    if (need_input_grad) {
      grad_input_.resize(input_.shape());
      p.diff_src.set_data_handle(grad_input_.data());
      p.kernel.set_data_handle(kernel_.value.data());
      p.bwdd_scratch.set_data_handle(scratch_.data());
      if (p.reorder_data_weights)
        p.data_weights_reorder.execute(p.stream, p.data_weights_reorder_args);
      p.bwd_data.execute(p.stream, p.bwdd_args);
    }
    p.stream.wait();
  } catch (const dnnl::error& e) {
    fail("backward convolution", e);
  }
  if (!need_input_grad) grad_input_ = Tensor();
  return grad_input_;
}

std::vector<Parameter*> Conv2D::parameters() {
  if (options_.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

nlohmann::json Conv2D::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"filters", options_.filters},
          {"kernel_size", pair_json(options_.kernel_size)},
          {"strides", pair_json(options_.strides)},
          {"padding", padding_name(options_.padding)},
          {"data_format", "channels_last"},
          {"dilation_rate", pair_json(options_.dilation_rate)},
          {"groups", 1},
          {"activation", activation_name(options_.activation)},
          {"use_bias", options_.use_bias},
          {"kernel_initializer", options_.kernel_initializer.config()},
          {"bias_initializer", options_.bias_initializer.config()},
          {"kernel_regularizer", nullptr},
          {"bias_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", nullptr},
          {"bias_constraint", nullptr}};
}

}  // namespace tandem::nn
