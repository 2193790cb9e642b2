// tandem_bench: training throughput of Tandem's reference workloads, plus sgemm peak, as JSON.
//
// Measures, on random in-memory data:
//   * "step": full training steps through the public API (Model::forward, Loss::compute,
//     Model::backward, Optimizer::apply) on pre-generated batches; per-phase times too. This is
//     what bench/pytorch_bench.py measures for PyTorch (no data loading in either).
//   * "fit": Trainer::fit over an in-memory Dataset through a DataLoader (shuffle, prefetch 2),
//     i.e. what `tandem train` does minus file I/O; the prefetch thread shares the cores.
//   * "gemm": tandem::cpu::gemm (oneDNN dnnl_sgemm) alone for the seed-mlp's GEMM shapes, and
//     the whole GEMM sequence of one seed-mlp step (the ceiling a step could reach).
//   * "adam": diagnostics of the Adam update at the seed-mlp and fashion-mlp sizes (engine vs a
//     vectorised copy of the same loop, see adam_variants.cpp, and a pure memory stream).
//   * "long_run" (fashion-mlp): 2,500 steps from fresh weights, start vs end, as the engine runs
//     them and with flush-to-zero/denormals-are-zero forced (Adam's state drifts into subnormal
//     floats unless the engine flushes them).
//   * "elementwise": the engine's tanh/relu at the seed-mlp sizes vs oneDNN's eltwise primitive.
//   * "layers": per-layer forward/backward times, to split steps into GEMM and element-wise work.
//   * fashion-cnn (resources/configs/fashion-cnn.json, batch 128): "step", "fit" and "layers" as
//     above, plus the convolution/GEMM FLOPs a step executes (to read steps as GFLOP/s).
// Usage: tandem_bench [--only fashion-mlp,seed-mlp,fashion-cnn,fashion-resnet,tiny-transformer,
//                            gemm,adam,elementwise]
//                     [--no-fit] [--no-step] [--no-long]
//                     [--configs DIR] [--seed-steps N] [--seed-batch N] [--quick]
//                     [--precision fp32|bf16] [--config FILE [--batch N]]
// --precision bf16 computes every workload's layers on the bf16 CPU backend (bfloat16 operands
// for GEMMs and convolutions, float32 sums), as `"precision": "bf16"` does.
// --config FILE times the training step of any run config at --batch N (default 64) on random
// inputs, as workload "config" (bench/layer_compare), instead of the reference workloads.
// Progress goes to stderr, the JSON object to stdout.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "adam_variants.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/parallel.hpp"
#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "nn/dtype_policy.hpp"
#include "data/data_loader.hpp"
#include "data/dataset.hpp"
#include "nn/loss.hpp"
#include "tandem/model.hpp"
#include "optim/optimizer.hpp"
#include "util/process_setup.hpp"
#include "tandem/rng.hpp"
#include "train/trainer.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using tandem::Shape;
using tandem::Tensor;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void progress(const std::string& line) {
  std::fprintf(stderr, "[tandem_bench] %s\n", line.c_str());
}

struct Options {
  std::set<std::string> only{"fashion-mlp", "seed-mlp", "fashion-cnn",
                             "gemm",        "adam",     "elementwise"};
  bool fit = true;
  bool step = true;
  bool long_run = true;
  std::string configs = std::string(TANDEM_SOURCE_DIR) + "/resources/configs";
  int seed_steps = 10;
  std::int64_t seed_batch = 256;  // the issue fixes batch 256 for the benchmark
  bool quick = false;
  tandem::Precision precision = tandem::Precision::fp32;
  std::string config;  // --config: any run config's training step, at --batch
  std::int64_t batch = 64;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tandem_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--only") {
      o.only.clear();
      std::stringstream s(value());
      for (std::string item; std::getline(s, item, ',');) o.only.insert(item);
    } else if (a == "--no-fit") {
      o.fit = false;
    } else if (a == "--no-step") {
      o.step = false;
    } else if (a == "--no-long") {
      o.long_run = false;
    } else if (a == "--configs") {
      o.configs = value();
    } else if (a == "--seed-steps") {
      o.seed_steps = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--seed-batch") {
      o.seed_batch = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--precision") {
      o.precision = tandem::parse_precision(value(), "--precision");
    } else if (a == "--config") {
      o.config = value();
      o.only.clear();
    } else if (a == "--batch") {
      o.batch = std::max(1, std::atoi(value().c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: tandem_bench [--only fashion-mlp,seed-mlp,fashion-cnn,gemm,adam,"
                   "elementwise] "
                   "[--no-fit] [--no-step] [--no-long] "
                   "[--configs DIR] [--seed-steps N] [--seed-batch N] [--quick] "
                   "[--precision fp32|bf16] [--config FILE [--batch N]]\n");
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  return o;
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return json::parse(in);
}

// ---------------------------------------------------------------------------------------------
// Random in-memory data.

struct Data {
  Shape x_shape, y_shape;  // per sample
  std::int64_t samples = 0;
  std::vector<float> x, y;
};

// x uniform in [0, 1); y a class index (sparse CE) or 0/1 per output (binary CE).
Data random_data(const tandem::Model& model, const tandem::Loss& loss, std::int64_t samples,
                 std::uint64_t seed) {
  Data d;
  d.x_shape = model.input_shape();
  const bool sparse = loss.name() == "sparse_categorical_crossentropy";
  d.y_shape = sparse ? Shape{} : model.output_shape();
  d.samples = samples;
  const std::int64_t xr = tandem::shape_size(d.x_shape), yr = tandem::shape_size(d.y_shape);
  d.x.resize(static_cast<std::size_t>(samples * xr));
  d.y.resize(static_cast<std::size_t>(samples * yr));
  tandem::Rng rng(seed);
  for (float& v : d.x) v = rng.uniform();
  const std::uint64_t classes = static_cast<std::uint64_t>(model.output_shape().back());
  for (float& v : d.y) v = static_cast<float>(rng.below(sparse ? classes : 2));
  return d;
}

// Batches [k * batch, (k + 1) * batch) of `d` as tensors.
void batches(const Data& d, std::int64_t batch, std::vector<Tensor>& xs, std::vector<Tensor>& ys) {
  const std::int64_t xr = tandem::shape_size(d.x_shape), yr = tandem::shape_size(d.y_shape);
  for (std::int64_t b = 0; b + batch <= d.samples; b += batch) {
    Shape xs_shape{batch}, ys_shape{batch};
    xs_shape.insert(xs_shape.end(), d.x_shape.begin(), d.x_shape.end());
    ys_shape.insert(ys_shape.end(), d.y_shape.begin(), d.y_shape.end());
    Tensor x(xs_shape), y(ys_shape);
    std::memcpy(x.data(), d.x.data() + b * xr, sizeof(float) * batch * xr);
    std::memcpy(y.data(), d.y.data() + b * yr, sizeof(float) * batch * yr);
    xs.push_back(std::move(x));
    ys.push_back(std::move(y));
  }
}

class MemoryDataset final : public tandem::Dataset {
 public:
  explicit MemoryDataset(Data d) : d_(std::move(d)) {}
  std::int64_t size() const override { return d_.samples; }
  Shape x_shape() const override { return d_.x_shape; }
  Shape y_shape() const override { return d_.y_shape; }
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    const std::int64_t xr = tandem::shape_size(d_.x_shape), yr = tandem::shape_size(d_.y_shape);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      std::memcpy(x + k * xr, d_.x.data() + i * xr, sizeof(float) * xr);
      std::memcpy(y + k * yr, d_.y.data() + i * yr, sizeof(float) * yr);
    }
  }
  std::string describe() const override {
    return "memory: " + std::to_string(d_.samples) + " random samples";
  }

 private:
  Data d_;
};

// ---------------------------------------------------------------------------------------------
// Workloads.

struct Workload {
  std::string name;
  std::unique_ptr<tandem::Model> model;
  std::unique_ptr<tandem::Loss> loss;
  std::unique_ptr<tandem::Optimizer> optimizer;
  std::int64_t batch = 0;
};

Workload make_workload_of(const Options& o, const std::string& file, const std::string& name,
                          std::int64_t batch) {
  const json cfg = load_json(file);
  Workload w;
  w.name = name;
  w.model = tandem::Model::from_config(cfg.at("model"), "model", cfg.value("seed", 0));
  const auto precisions = tandem::nn::layer_precisions(*w.model, o.precision);
  for (std::size_t l = 0; l < w.model->layer_count(); ++l)
    w.model->layer(l).set_backend(tandem::backend::cpu_backend(precisions[l]));
  w.loss = tandem::make_loss(cfg.at("loss"), "loss");
  w.optimizer = tandem::make_optimizer(cfg.at("optimizer"), "optimizer");
  w.batch = batch;
  return w;
}

Workload make_workload(const Options& o, const std::string& name, std::int64_t batch) {
  return make_workload_of(o, o.configs + "/" + name + ".json", name, batch);
}

// Index of the first layer with trainable parameters: no layer before it needs an input grad.
std::size_t first_trainable_layer(tandem::Model& m) {
  for (std::size_t i = 0; i < m.layer_count(); ++i)
    if (m.layer(i).trainable() && !m.layer(i).parameters().empty()) return i;
  return m.layer_count();
}

// (in, out) of each Dense kernel, in layer order.
struct DenseShape {
  std::int64_t in, out;
};
std::vector<DenseShape> dense_shapes(tandem::Model& m) {
  std::vector<DenseShape> out;
  for (tandem::Parameter* p : m.trainable_parameters())
    if (p->value.rank() == 2) out.push_back({p->value.dim(0), p->value.dim(1)});
  return out;
}

struct StepTimes {
  std::vector<double> step, forward, loss, backward, optimizer;
};

// One step with per-phase timings. `skip_unneeded_dx`: back-propagate through the layers
// ourselves, asking for an input gradient only where an earlier layer has parameters, as a
// reference for Model::backward (which once asked every layer but the first for one, wasting a
// 128x784 GEMM per fashion-mlp step behind Flatten; see docs/benchmarks.md, F3).
void timed_step(Workload& w, const Tensor& x, const Tensor& y, Tensor& grad, StepTimes* t,
                bool skip_unneeded_dx = false) {
  const std::int64_t n = x.dim(0);
  const auto t0 = Clock::now();
  const Tensor& out = w.model->forward(x, true);
  const auto t1 = Clock::now();
  w.loss->compute(out, y, 1.0f / static_cast<float>(n), &grad);
  const auto t2 = Clock::now();
  if (skip_unneeded_dx) {
    const std::size_t first = first_trainable_layer(*w.model);
    const Tensor* g = &grad;
    for (std::size_t i = w.model->layer_count(); i-- > 0;)
      g = &w.model->layer(i).backward(*g, i > first);
  } else {
    w.model->backward(grad);
  }
  const auto t3 = Clock::now();
  w.optimizer->apply(w.model->trainable_parameters());
  const auto t4 = Clock::now();
  if (t) {
    auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    t->step.push_back(s(t0, t4));
    t->forward.push_back(s(t0, t1));
    t->loss.push_back(s(t1, t2));
    t->backward.push_back(s(t2, t3));
    t->optimizer.push_back(s(t3, t4));
  }
}

// Training-step variants measured side by side: after `warmup` steps each, chunks of `per_chunk`
// steps alternate between the variants (so a disturbance from another process hits all of them
// alike); throughput per chunk, median reported. Per-phase medians are over single steps.
struct StepVariant {
  Workload* w;
  bool skip_unneeded_dx;
};

std::vector<json> bench_steps(const std::vector<StepVariant>& variants,
                              const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                              int warmup, int chunks, int per_chunk) {
  const std::size_t nv = variants.size();
  std::vector<Tensor> grad(nv);
  std::vector<std::size_t> k(nv, 0);
  std::vector<StepTimes> t(nv);
  std::vector<std::vector<double>> chunk_sps(nv);
  for (std::size_t v = 0; v < nv; ++v)
    for (int i = 0; i < warmup; ++i, ++k[v])
      timed_step(*variants[v].w, xs[k[v] % xs.size()], ys[k[v] % ys.size()], grad[v], nullptr,
                 variants[v].skip_unneeded_dx);
  for (int c = 0; c < chunks; ++c)
    for (std::size_t v = 0; v < nv; ++v) {
      const auto t0 = Clock::now();
      for (int i = 0; i < per_chunk; ++i, ++k[v])
        timed_step(*variants[v].w, xs[k[v] % xs.size()], ys[k[v] % ys.size()], grad[v], &t[v],
                   variants[v].skip_unneeded_dx);
      chunk_sps[v].push_back(static_cast<double>(variants[v].w->batch * per_chunk) /
                             seconds_since(t0));
    }
  auto ms = [](const std::vector<double>& v) { return median(v) * 1e3; };
  std::vector<json> out;
  for (std::size_t v = 0; v < nv; ++v)
    out.push_back({{"samples_per_s", median(chunk_sps[v])},
                   {"samples_per_s_runs", chunk_sps[v]},
                   {"steps_per_run", per_chunk},
                   {"warmup_steps", warmup},
                   {"step_ms", ms(t[v].step)},
                   {"phase_ms",
                    {{"forward", ms(t[v].forward)},
                     {"loss", ms(t[v].loss)},
                     {"backward", ms(t[v].backward)},
                     {"optimizer", ms(t[v].optimizer)}}}});
  return out;
}

// Per-layer forward/backward times (median over `steps` steps after one warm-up step), to split
// a step into GEMM and element-wise work; input gradients only where an earlier layer has
// parameters. The optimizer is applied so weights move as in training.
json bench_layers(Workload& w, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                  int steps) {
  auto& m = *w.model;
  const std::size_t L = m.layer_count();
  const std::size_t first = first_trainable_layer(m);
  std::vector<std::vector<double>> fwd(L), bwd(L);
  Tensor grad;
  for (int s = 0; s < steps + 1; ++s) {
    const Tensor& x = xs[static_cast<std::size_t>(s) % xs.size()];
    const Tensor& y = ys[static_cast<std::size_t>(s) % ys.size()];
    const Tensor* h = &x;
    for (std::size_t i = 0; i < L; ++i) {
      const auto t0 = Clock::now();
      h = &m.layer(i).forward(*h, true);
      if (s > 0) fwd[i].push_back(seconds_since(t0));
    }
    w.loss->compute(*h, y, 1.0f / static_cast<float>(x.dim(0)), &grad);
    const Tensor* g = &grad;
    for (std::size_t i = L; i-- > 0;) {
      const auto t0 = Clock::now();
      g = &m.layer(i).backward(*g, i > first);  // input gradients only where needed
      if (s > 0) bwd[i].push_back(seconds_since(t0));
    }
    w.optimizer->apply(m.trainable_parameters());
  }
  json out = json::array();
  for (std::size_t i = 0; i < L; ++i)
    out.push_back({{"layer", m.layer(i).name()},
                   {"class", m.layer(i).class_name()},
                   {"output", tandem::shape_to_string(m.layer_output_shape(i), true)},
                   {"forward_ms", median(fwd[i]) * 1e3},
                   {"backward_ms", median(bwd[i]) * 1e3},
                   {"input_grad", i > first}});
  return out;
}

// Trainer::fit over a MemoryDataset (DataLoader: shuffle, prefetch 2, no metrics, verbose 0).
// One warm-up epoch over a small subset, then `epochs` timed epochs; median epoch throughput.
json bench_fit(Workload& w, Data data, std::int64_t warm_samples, int epochs) {
  const std::int64_t samples = data.samples;
  auto ds = std::make_shared<MemoryDataset>(std::move(data));
  auto warm = tandem::make_subset(ds, 0, warm_samples);
  tandem::DataLoaderOptions lo;
  lo.batch_size = w.batch;
  lo.shuffle = true;
  lo.seed = 1;
  lo.prefetch = 2;
  tandem::DataLoader warm_loader(warm, lo);
  tandem::DataLoader loader(ds, lo);
  tandem::DevicePlan plan;
  plan.replicas.push_back({tandem::DeviceKind::cpu, 0});
  plan.text = "cpu:1";
  tandem::ReplicaModel meta(*w.model, *w.optimizer, plan);
  tandem::Trainer trainer(meta, tandem::Objective::borrowing(*w.loss, {}));
  tandem::FitOptions fo;
  fo.epochs = 1;
  trainer.fit(warm_loader, nullptr, fo);
  std::vector<double> sps;
  for (int e = 0; e < epochs; ++e) {
    fo.epochs = 2 + e;
    const auto t0 = Clock::now();
    trainer.fit(loader, nullptr, fo);
    sps.push_back(static_cast<double>(samples) / seconds_since(t0));
  }
  return {{"samples_per_s", median(sps)},
          {"samples_per_s_runs", sps},
          {"samples_per_epoch", samples},
          {"loader", "DataLoader(shuffle, prefetch 2) over an in-memory Dataset"}};
}

json model_info(Workload& w) {
  return {{"parameters", w.model->count_params()},
          {"batch", w.batch},
          {"loss", w.loss->name()},
          {"optimizer", w.optimizer->config()}};
}

// Fraction of subnormal floats in the optimizer's slots (Adam m and v).
double subnormal_fraction(tandem::Optimizer& opt) {
  double sub = 0, all = 0;
  for (std::size_t i = 0; i < opt.slotted_params(); ++i)
    for (const Tensor& t : opt.slots(i))
      for (float v : t.values()) {
        sub += std::fpclassify(v) == FP_SUBNORMAL;
        all += 1;
      }
  return all > 0 ? sub / all : 0;
}

// Sets (or clears) flush-to-zero and denormals-are-zero in MXCSR on every compute thread (the
// OpenMP team oneDNN and Tandem's kernels share; MXCSR is per thread).
void set_ftz_daz(bool on) {
#pragma omp parallel num_threads(tandem::cpu::compute_threads())
  {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(on ? (csr | 0x8040u) : (csr & ~0x8040u));
  }
}

// A long run (about five Fashion-MNIST epochs of steps) from fresh weights: optimizer and step
// times at the start and at the end, and how many Adam slot values became subnormal. With
// `force_ftz`, FTZ/DAZ is set on the compute threads for the run (and cleared afterwards);
// without, MXCSR is left as the engine sets it.
json bench_long_run(const Options& o, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                    int steps, bool force_ftz) {
  Workload w = make_workload(o, "fashion-mlp", 128);
  if (force_ftz) set_ftz_daz(true);
  Tensor grad;
  StepTimes t;
  for (int i = 0; i < steps; ++i)
    timed_step(w, xs[static_cast<std::size_t>(i) % xs.size()],
               ys[static_cast<std::size_t>(i) % ys.size()], grad, &t);
  const bool ftz_main = (_mm_getcsr() & 0x8040u) == 0x8040u;
  if (force_ftz) set_ftz_daz(false);
  const std::size_t window = 100;
  auto slice = [&](const std::vector<double>& v, bool last) {
    return last ? std::vector<double>(v.end() - window, v.end())
                : std::vector<double>(v.begin() + 10, v.begin() + 10 + window);
  };
  json r = {{"steps", steps},
            {"ftz_daz_forced", force_ftz},
            {"ftz_daz_in_main_thread", ftz_main},
            {"adam_subnormal_fraction_at_end", subnormal_fraction(*w.optimizer)}};
  for (bool last : {false, true}) {
    const double step = median(slice(t.step, last));
    r[last ? "last_100_steps" : "first_100_steps"] = {
        {"step_ms", step * 1e3},
        {"optimizer_ms", median(slice(t.optimizer, last)) * 1e3},
        {"samples_per_s", static_cast<double>(w.batch) / step}};
  }
  return r;
}

// Cost of one fork/join of the compute team (an empty parallel region every ~20 µs of serial
// work, the way a small training step alternates serial code and kernels): median µs per region.
double omp_region_us() {
  const int threads = tandem::cpu::compute_threads();
  std::vector<double> t;
  volatile double sink = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto gap = Clock::now();
    while (seconds_since(gap) < 20e-6) sink = sink + 1;  // serial work between kernels
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    { asm volatile("" ::: "memory"); }
    t.push_back(seconds_since(t0));
  }
  return median(t) * 1e6;
}

// Every measurement starts from fresh weights and optimizer state, so none depends on how many
// steps an earlier one took (Adam state drifts into subnormals over long runs: see long_run).
json run_fashion(const Options& o) {
  progress("fashion-mlp: building");
  Workload w = make_workload(o, "fashion-mlp", 128);
  json r = model_info(w);
  const Data data = random_data(*w.model, *w.loss, w.batch * 16, 11);
  std::vector<Tensor> xs, ys;
  batches(data, w.batch, xs, ys);
  const int chunks = o.quick ? 5 : 15, per_chunk = 40;
  if (o.step) {
    progress(
        "fashion-mlp: timing steps, as is and without the unneeded input gradient of the "
        "first Dense, alternating");
    Workload w2 = make_workload(o, "fashion-mlp", 128);
    const auto res = bench_steps({{&w, false}, {&w2, true}}, xs, ys, 40, chunks, per_chunk);
    r["step"] = res[0];
    r["step_skip_unneeded_dx"] = res[1];
    Workload w3 = make_workload(o, "fashion-mlp", 128);
    r["layers"] = bench_layers(w3, xs, ys, 50);
  }
  r["omp_parallel_region_us"] = omp_region_us();
  if (o.fit) {
    progress("fashion-mlp: timing Trainer::fit");
    Workload w4 = make_workload(o, "fashion-mlp", 128);
    r["fit"] = bench_fit(w4, random_data(*w4.model, *w4.loss, w4.batch * 120, 12), w4.batch * 8,
                         o.quick ? 1 : 3);
  }
  if (o.long_run) {
    const int steps = o.quick ? 1200 : 2500;
    progress("fashion-mlp: " + std::to_string(steps) +
             " steps from fresh weights, as the engine runs them and with FTZ/DAZ forced");
    r["long_run"] = bench_long_run(o, xs, ys, steps, false);
    r["long_run_ftz_daz"] = bench_long_run(o, xs, ys, steps, true);
  }
  return r;
}

json run_seed(const Options& o) {
  progress("seed-mlp: building (41M parameters)");
  Workload w = make_workload(o, "seed-mlp", o.seed_batch);
  json r = model_info(w);
  const Data data = random_data(*w.model, *w.loss, w.batch * 4, 21);
  std::vector<Tensor> xs, ys;
  batches(data, w.batch, xs, ys);
  if (o.step) {
    progress("seed-mlp: timing steps");
    const int steps = o.quick ? 3 : o.seed_steps;
    r["step"] = bench_steps({{&w, false}}, xs, ys, 3, steps, 1)[0];
    progress("seed-mlp: timing layer by layer");
    Workload w2 = make_workload(o, "seed-mlp", o.seed_batch);
    r["layers"] = bench_layers(w2, xs, ys, o.quick ? 2 : 4);
  }
  // FLOPs: 6 x parameters per sample (the usual convention), and what the step executes: the
  // first Dense computes no input gradient, so 4 x its weights there.
  const double params = static_cast<double>(w.model->count_params());
  double executed = 0;
  const auto shapes = dense_shapes(*w.model);
  for (std::size_t i = 0; i < shapes.size(); ++i)
    executed += (i == 0 ? 4.0 : 6.0) * static_cast<double>(shapes[i].in * shapes[i].out);
  r["model_flops_per_sample"] = 6.0 * params;
  r["executed_gemm_flops_per_sample"] = executed;
  if (o.fit) {
    progress("seed-mlp: timing Trainer::fit");
    w = make_workload(o, "seed-mlp", o.seed_batch);
    r["fit"] = bench_fit(w, random_data(*w.model, *w.loss, w.batch * 8, 22), w.batch * 2, 1);
  }
  return r;
}

// Multiply-add FLOPs per sample of one training step of a Conv2D/Dense stack: forward, weight
// gradient, and input gradient for every trainable layer after the first (Model::backward asks
// the first for none). Pooling, activations, loss and optimizer are not counted.
json executed_flops(tandem::Model& m) {
  const std::size_t first = first_trainable_layer(m);
  double fwd = 0, bwd = 0;
  json per_layer = json::array();
  for (std::size_t i = 0; i < m.layer_count(); ++i) {
    tandem::Layer& l = m.layer(i);
    const std::string cls = l.class_name();
    if (cls != "Conv2D" && cls != "Dense") continue;
    const Tensor& k = l.parameters().at(0)->value;  // Conv2D (kh, kw, in, out); Dense (in, out)
    double macs = static_cast<double>(k.size());
    const Shape& out = m.layer_output_shape(i);
    for (std::size_t d = 0; d + 1 < out.size(); ++d) macs *= static_cast<double>(out[d]);
    const double f = 2.0 * macs;
    fwd += f;
    bwd += (i > first ? 2.0 : 1.0) * f;
    per_layer.push_back({{"layer", l.name()}, {"forward_flops", f}, {"input_grad", i > first}});
  }
  return {{"forward_flops_per_sample", fwd},
          {"training_flops_per_sample", fwd + bwd},
          {"layers", per_layer}};
}

// fashion-cnn (Reshape, Conv2D 32 3x3 relu, MaxPool 2, Conv2D 64 3x3 relu, MaxPool 2, Flatten,
// Dense 128 relu, Dense 10) at batch 128, as the fashion-mlp: steps, per layer, Trainer::fit.
json run_cnn(const Options& o) {
  progress("fashion-cnn: building");
  Workload w = make_workload(o, "fashion-cnn", 128);
  json r = model_info(w);
  r["flops"] = executed_flops(*w.model);
  const Data data = random_data(*w.model, *w.loss, w.batch * 8, 31);
  std::vector<Tensor> xs, ys;
  batches(data, w.batch, xs, ys);
  if (o.step) {
    progress("fashion-cnn: timing steps");
    // 20 runs of 8 steps (about 1.5 s): this VM has slow phases of a few hundred ms; the median
    // of many short runs is less sensitive to them than a few long ones.
    r["step"] = bench_steps({{&w, false}}, xs, ys, 10, o.quick ? 5 : 20, 8)[0];
    progress("fashion-cnn: timing layer by layer");
    Workload w2 = make_workload(o, "fashion-cnn", 128);
    r["layers"] = bench_layers(w2, xs, ys, o.quick ? 5 : 20);
  }
  if (o.fit) {
    progress("fashion-cnn: timing Trainer::fit");
    Workload w3 = make_workload(o, "fashion-cnn", 128);
    r["fit"] = bench_fit(w3, random_data(*w3.model, *w3.loss, w3.batch * 32, 32), w3.batch * 4,
                         o.quick ? 1 : 3);
  }
  return r;
}

// fashion-resnet (resources/configs/fashion-resnet.json: a functional ResNet-20 with Add and
// BatchNormalization) at batch 128: training steps only (the per-layer breakdown walks a chain).
json run_resnet(const Options& o) {
  progress("fashion-resnet: building");
  Workload w = make_workload(o, "fashion-resnet", 128);
  json r = model_info(w);
  const Data data = random_data(*w.model, *w.loss, w.batch * 4, 33);
  std::vector<Tensor> xs, ys;
  batches(data, w.batch, xs, ys);
  if (o.step) {
    progress("fashion-resnet: timing steps");
    r["step"] = bench_steps({{&w, false}}, xs, ys, 3, o.quick ? 3 : 8, 4)[0];
  }
  return r;
}

// tiny-transformer (resources/configs/tiny-transformer.json: Embedding, PositionEmbedding, two
// encoder blocks of MultiHeadAttention, LayerNormalization and Dense) at batch 64, on random
// token sequences: training steps only.
json run_transformer(const Options& o) {
  progress("tiny-transformer: building");
  Workload w = make_workload(o, "tiny-transformer", 64);
  json r = model_info(w);
  Data data = random_data(*w.model, *w.loss, w.batch * 4, 35);
  for (float& v : data.x) v = 1.0f + std::floor(v * 31.0f);  // token ids in [1, 32)
  std::vector<Tensor> xs, ys;
  batches(data, w.batch, xs, ys);
  if (o.step) {
    progress("tiny-transformer: timing steps");
    r["step"] = bench_steps({{&w, false}}, xs, ys, 5, o.quick ? 3 : 8, 8)[0];
  }
  return r;
}

// Any run config (--config FILE) at --batch, on random inputs in [0, 1) (a model that embeds
// token ids is not for this): training steps only, as bench/layer_compare times single layers.
json run_config(const Options& o) {
  progress(o.config + ": building");
  Workload w = make_workload_of(o, o.config, o.config, o.batch);
  json r = model_info(w);
  Data data = random_data(*w.model, *w.loss, w.batch * 4, 37);
  std::vector<Tensor> xs, ys;
  batches(data, w.batch, xs, ys);
  progress(o.config + ": timing steps");
  r["step"] = bench_steps({{&w, false}}, xs, ys, 5, o.quick ? 3 : 8, 8)[0];
  return r;
}

// ---------------------------------------------------------------------------------------------
// sgemm.

struct GemmCase {
  std::string name;
  bool ta, tb;
  std::int64_t m, n, k;
};

struct GemmBuffers {
  Tensor a, b, c;
  GemmBuffers(const GemmCase& g) : a({g.m * g.k}), b({g.k * g.n}), c({g.m * g.n}) {
    tandem::Rng rng(5);
    for (float& v : a.values()) v = rng.uniform() - 0.5f;
    for (float& v : b.values()) v = rng.uniform() - 0.5f;
  }
  void run(const GemmCase& g) {
    tandem::cpu::gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a.data(), g.ta ? g.m : g.k, b.data(),
                      g.tb ? g.k : g.n, 0.0f, c.data(), g.n);
  }
};

// Median GFLOP/s over at least 5 calls and `min_seconds` after 2 warm-up calls.
json bench_gemm(const GemmCase& g, double min_seconds) {
  GemmBuffers buf(g);
  for (int i = 0; i < 2; ++i) buf.run(g);
  std::vector<double> t;
  const auto start = Clock::now();
  while (t.size() < 5 || seconds_since(start) < min_seconds) {
    const auto t0 = Clock::now();
    buf.run(g);
    t.push_back(seconds_since(t0));
  }
  const double flops = 2.0 * g.m * g.n * g.k;
  return {{"name", g.name},
          {"trans_a", g.ta},
          {"trans_b", g.tb},
          {"m", g.m},
          {"n", g.n},
          {"k", g.k},
          {"calls", t.size()},
          {"ms", median(t) * 1e3},
          {"gflops", flops / median(t) / 1e9}};
}

// All the GEMMs of one step of a Dense stack (forward, then dW and dX layer by layer backwards,
// as Dense calls them; no dX for the first layer), timed as a sequence: the time a step would
// take if it were all GEMM.
json bench_gemm_sequence(const std::vector<DenseShape>& layers, std::int64_t batch, int reps) {
  std::vector<GemmCase> seq;
  for (const auto& l : layers) seq.push_back({"fwd", false, false, batch, l.out, l.in});
  for (std::size_t i = layers.size(); i-- > 0;) {
    seq.push_back({"dW", true, false, layers[i].in, layers[i].out, batch});
    if (i > 0) seq.push_back({"dX", false, true, batch, layers[i].in, layers[i].out});
  }
  std::vector<std::unique_ptr<GemmBuffers>> bufs;
  double flops = 0;
  for (const auto& g : seq) {
    bufs.push_back(std::make_unique<GemmBuffers>(g));
    flops += 2.0 * g.m * g.n * g.k;
  }
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < seq.size(); ++i) bufs[i]->run(seq[i]);
    if (r > 0) t.push_back(seconds_since(t0));
  }
  return {{"gemm_calls", seq.size()},
          {"flops", flops},
          {"ms", median(t) * 1e3},
          {"gflops", flops / median(t) / 1e9},
          {"samples_per_s", static_cast<double>(batch) / median(t)}};
}

json run_gemm(const Options& o) {
  progress("gemm: timing tandem::cpu::gemm (dnnl_sgemm)");
  const double min_s = o.quick ? 0.2 : 0.5;
  const std::int64_t b = o.seed_batch;
  const std::vector<GemmCase> seed_cases = {
      {"seed-mlp dense fwd", false, false, b, 4000, 8000},
      {"seed-mlp dense dW", true, false, 8000, 4000, b},
      {"seed-mlp dense_1 fwd", false, false, b, 2000, 4000},
      {"seed-mlp dense_1 dX", false, true, b, 4000, 2000},
      {"seed-mlp dense_1 dW", true, false, 4000, 2000, b},
  };
  const std::vector<GemmCase> other_cases = {
      {"fashion-mlp dense fwd", false, false, 128, 256, 784},
      {"M256 N8000 K4000", false, false, 256, 8000, 4000},
      {"M1024 N1024 K1024", false, false, 1024, 1024, 1024},
  };
  json r;
  json shapes = json::array();
  double peak = 0;
  for (const auto& g : seed_cases) {
    json one = bench_gemm(g, min_s);
    peak = std::max(peak, one["gflops"].get<double>());
    shapes.push_back(one);
  }
  json others = json::array();
  for (const auto& g : other_cases) others.push_back(bench_gemm(g, min_s));
  r["seed_mlp_shapes"] = shapes;
  r["other_shapes"] = others;
  r["peak_gflops"] = peak;
  r["peak_definition"] = "best GFLOP/s of dnnl_sgemm over the seed-mlp shapes above";
  // The seed-mlp's Dense stack (resources/configs/seed-mlp.json).
  std::vector<DenseShape> layers = {{8000, 4000}, {4000, 2000}, {2000, 500}, {500, 300}, {300, 1}};
  r["seed_mlp_step_gemm_sequence"] = bench_gemm_sequence(layers, b, o.quick ? 2 : 5);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Adam at the seed-mlp's and fashion-mlp's parameter counts: the engine's optimizer vs
// vectorised copies of its loop and a plain memory stream.

json adam_case(std::int64_t n, int reps);

json run_adam(const Options& o) {
  progress("adam: engine update vs vectorised variants (seed-mlp and fashion-mlp sizes)");
  return {{"seed-mlp", adam_case(41157101, o.quick ? 3 : 7)},
          {"fashion-mlp", adam_case(235146, 200)}};
}

// The engine's Adam (one Parameter of n elements) vs bench::adam_* and a pure stream, n elements.
json adam_case(std::int64_t n, int reps) {
  tandem::Parameter p;
  p.name = "w";
  p.value = Tensor({n});
  p.grad = Tensor({n});
  tandem::Rng rng(9);
  for (float& v : p.value.values()) v = rng.uniform() - 0.5f;
  for (float& v : p.grad.values()) v = (rng.uniform() - 0.5f) * 1e-3f;
  auto opt = tandem::make_optimizer(
      json{{"class_name", "Adam"}, {"config", {{"learning_rate", 1e-4}}}}, "optimizer");
  std::vector<tandem::Parameter*> params{&p};
  auto time_it = [&](const std::function<void()>& f) {
    f();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      f();
      t.push_back(seconds_since(t0));
    }
    return median(t);
  };
  const double bytes = 7.0 * 4.0 * static_cast<double>(n);  // read w g m v, write w m v
  json r;
  auto add = [&](const std::string& name, double s) {
    r[name] = {{"ms", s * 1e3}, {"gb_per_s", bytes / s / 1e9}};
  };
  add("engine_optimizer_apply", time_it([&] { opt->apply(params); }));
  Tensor m({n}), v({n});
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-7f, alpha = 1e-4f;
  add("vectorised_sse2", time_it([&] {
        bench::adam_sse2(p.value.data(), p.grad.data(), m.data(), v.data(), n, alpha, b1, b2, eps);
      }));
  if (bench::has_avx512())
    add("vectorised_avx512", time_it([&] {
          bench::adam_avx512(p.value.data(), p.grad.data(), m.data(), v.data(), n, alpha, b1, b2,
                             eps);
        }));
  add("stream_4_reads_3_writes",
      time_it([&] { bench::stream_7(p.value.data(), p.grad.data(), m.data(), v.data(), n); }));
  r["parameters"] = n;
  r["bytes_per_update"] = bytes;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Element-wise kernels of the seed-mlp step (engine) vs oneDNN's JIT eltwise tanh.

json run_elementwise(const Options& o) {
  progress("elementwise: activations at the seed-mlp sizes");
  const int reps = o.quick ? 5 : 20;
  auto time_it = [&](const std::function<void()>& f) {
    f();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      f();
      t.push_back(seconds_since(t0));
    }
    return median(t) * 1e3;
  };
  using tandem::nn::ActivationKind;
  const std::int64_t rows = o.seed_batch;
  json r;
  for (auto [kind, cols, name] : {std::tuple{ActivationKind::tanh, std::int64_t{4000}, "tanh"},
                                  std::tuple{ActivationKind::relu, std::int64_t{2000}, "relu"}}) {
    const std::int64_t n = rows * cols;
    Tensor in({n}), out({n}), go({n}), gi({n});
    tandem::Rng rng(3);
    for (float& v : in.values()) v = 4.0f * rng.uniform() - 2.0f;
    for (float& v : go.values()) v = rng.uniform() - 0.5f;
    const std::string key =
        std::string(name) + " " + std::to_string(rows) + "x" + std::to_string(cols);
    r[key]["engine_forward_ms"] =
        time_it([&] { tandem::backend::cpu_backend().activation_forward(kind, in, out, cols); });
    r[key]["engine_backward_ms"] = time_it(
        [&] { tandem::backend::cpu_backend().activation_backward(kind, in, out, go, gi, cols); });
    // oneDNN eltwise forward on the same data (JIT, AVX-512 here).
    using namespace dnnl;
    engine eng(engine::kind::cpu, 0);
    stream st(eng);
    memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
    memory src(md, eng, in.data()), dst(md, eng, out.data());
    const algorithm alg =
        kind == ActivationKind::tanh ? algorithm::eltwise_tanh : algorithm::eltwise_relu;
    eltwise_forward::primitive_desc pd(
        eltwise_forward::desc(prop_kind::forward_training, alg, md, 0.f, 0.f), eng);
    eltwise_forward prim(pd);
    r[key]["onednn_eltwise_forward_ms"] = time_it([&] {
      prim.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
      st.wait();
    });
  }
  return r;
}

std::string now_iso() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  tandem::configure_process(argc, argv);
  const Options o = parse(argc, argv);
  json out;
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  out["tool"] = "tandem_bench";
  out["date"] = now_iso();
  out["threads"] = tandem::cpu::compute_threads();
  out["precision"] = tandem::precision_name(o.precision);
  out["omp_wait_policy"] = wait ? wait : "(unset: libgomp default)";
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  out["gomp_spincount"] = spin ? spin : "(unset: libgomp default)";
  out["gemm_library"] = "oneDNN dnnl_sgemm";
  try {
    json wl = json::object();
    if (o.only.count("fashion-mlp")) wl["fashion-mlp"] = run_fashion(o);
    if (o.only.count("seed-mlp")) wl["seed-mlp"] = run_seed(o);
    if (o.only.count("fashion-cnn")) wl["fashion-cnn"] = run_cnn(o);
    if (o.only.count("fashion-resnet")) wl["fashion-resnet"] = run_resnet(o);
    if (o.only.count("tiny-transformer")) wl["tiny-transformer"] = run_transformer(o);
    if (!o.config.empty()) wl["config"] = run_config(o);
    out["workloads"] = wl;
    if (o.only.count("gemm")) out["gemm"] = run_gemm(o);
    if (o.only.count("adam")) out["adam"] = run_adam(o);
    if (o.only.count("elementwise")) out["elementwise"] = run_elementwise(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem_bench: %s\n", e.what());
    return 1;
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}
