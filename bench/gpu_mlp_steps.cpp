// gpu_mlp_steps: the cuBLAS floor of a training step (issue 6's yardstick) next to PyTorch.
//
// For seed-mlp (batch 8192: Dense 8000 -> 4000 -> 2000 -> 500 -> 300 -> 1) and fashion-mlp (batch
// 128: 784 -> 256 -> 128 -> 10) it times, with CUDA events, exactly the GEMMs of one training step
// through Tandem's cuBLASLt path (forward with the bias fused, dX for every layer but the first,
// dW for every layer), in fp32 and in tf32: the floor a step cannot go below. Then it runs
// bench/seed_mlp_torch_gpu.py (PyTorch, data on the device, Adam, the same model) and prints
// PyTorch's step time as a ratio of the floor. It also times Tandem's own device-resident step
// (bench/gpu_dense_stack.hpp: forward, loss, backward, fused Adam; not the engine's training
// loop). One JSON line per measurement, then a table.
// Run by scripts/gpu-check on a GPU machine; without a device it says so and exits 0.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "gpu_dense_stack.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "cuda/ops/kernels.hpp"

using namespace tandem::cuda;

namespace {

struct Workload {
  const char* name;
  std::int64_t batch;
  std::vector<std::int64_t> widths;  // input, then every layer's units
  std::vector<Activation> activations;
  bool sparse_logits;  // sparse categorical cross-entropy on logits, else BCE on probabilities
};

// Median of 30 timed calls of `step` after 10 warm-up calls, in milliseconds (CUDA events).
template <class F>
double median_ms(F&& step, cudaStream_t s) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 10; ++i) step();
  std::vector<double> ms;
  for (int rep = 0; rep < 30; ++rep) {
    check(cudaEventRecord(start, s), "cudaEventRecord");
    step();
    check(cudaEventRecord(stop, s), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Tandem's whole step on the device: forward, loss and its gradient, backward, Adam.
double time_tandem_step(const Workload& w, Precision p, DeviceAllocator& alloc, cudaStream_t s) {
  std::vector<DenseSpec> specs;
  for (std::size_t l = 1; l < w.widths.size(); ++l)
    specs.push_back({w.widths[l], w.activations[l - 1]});
  DenseStack stack(alloc, s, p, w.widths.front(), specs);
  const std::int64_t n = stack.parameter_count(), out = w.widths.back();
  DeviceBuffer x(alloc, w.batch * w.widths.front()),
      y(alloc, w.batch * (w.sparse_logits ? 1 : out)), loss(alloc, w.batch),
      dy(alloc, w.batch * out), m(alloc, n), v(alloc, n);
  for (DeviceBuffer* b : {&x, &y, &m, &v, &loss, &dy})
    check(cudaMemsetAsync(b->data(), 0, static_cast<std::size_t>(b->size()) * 4, s), "memset");
  check(cudaMemsetAsync(stack.parameters(), 0, static_cast<std::size_t>(n) * 4, s), "memset");
  const float scale = 1.0f / static_cast<float>(w.batch);
  return median_ms(
      [&] {
        const float* pred = stack.forward(x.data(), w.batch);
        if (w.sparse_logits)
          sparse_categorical_crossentropy(pred, y.data(), w.batch, out, true, scale, loss.data(),
                                          dy.data(), s);
        else
          binary_crossentropy(pred, y.data(), w.batch, out, false, 0.0f, scale, loss.data(),
                              dy.data(), s);
        stack.backward(dy.data());
        adam_update(stack.parameters(), stack.gradients(), m.data(), v.data(), n, 1e-4f, 0.9f,
                    0.999f, 1e-7f, s);
      },
      s);
}

// The cuBLAS floor: exactly the GEMMs of one training step (bias fused into the forward ones).
double time_step(DenseGemm& gemm, const Workload& w, DeviceAllocator& alloc, cudaStream_t s) {
  const std::size_t layers = w.widths.size() - 1;
  std::vector<DeviceBuffer> acts, grads, weights, wgrads, biases;
  for (std::size_t l = 0; l <= layers; ++l) {
    acts.emplace_back(alloc, w.batch * w.widths[l]);
    grads.emplace_back(alloc, w.batch * w.widths[l]);
  }
  for (std::size_t l = 0; l < layers; ++l) {
    weights.emplace_back(alloc, w.widths[l] * w.widths[l + 1]);
    wgrads.emplace_back(alloc, w.widths[l] * w.widths[l + 1]);
    biases.emplace_back(alloc, w.widths[l + 1]);
  }
  for (auto* set : {&acts, &grads, &weights, &biases})
    for (auto& b : *set)
      check(cudaMemsetAsync(b.data(), 0, static_cast<std::size_t>(b.size()) * 4, s), "memset");
  auto step = [&] {
    for (std::size_t l = 0; l < layers; ++l)
      gemm.forward(acts[l].data(), weights[l].data(), biases[l].data(), acts[l + 1].data(), w.batch,
                   w.widths[l], w.widths[l + 1], DenseGemm::Epilogue::bias);
    for (std::size_t l = layers; l-- > 0;) {
      gemm.backward_weights(acts[l].data(), grads[l + 1].data(), wgrads[l].data(), w.batch,
                            w.widths[l], w.widths[l + 1]);
      if (l > 0)
        gemm.backward_data(grads[l + 1].data(), weights[l].data(), grads[l].data(), w.batch,
                           w.widths[l], w.widths[l + 1]);
    }
  };
  return median_ms(step, s);
}

double step_flops(const Workload& w) {
  double f = 0;
  for (std::size_t l = 0; l + 1 < w.widths.size(); ++l) {
    const double mnk = 2.0 * w.batch * w.widths[l] * w.widths[l + 1];
    f += mnk * (l > 0 ? 3 : 2);
  }
  return f;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("gpu_mlp_steps: no CUDA device; nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  using A = Activation;
  const std::vector<Workload> workloads = {
      {"seed-mlp",
       8192,
       {8000, 4000, 2000, 500, 300, 1},
       {A::tanh, A::relu, A::relu, A::relu, A::sigmoid},
       false},
      {"fashion-mlp", 128, {784, 256, 128, 10}, {A::relu, A::relu, A::linear}, true}};
  struct Row {
    std::string name, precision;
    double floor_ms, tandem_ms, torch_ms;
  };
  std::vector<Row> rows;
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  for (Precision p : {Precision::fp32, Precision::tf32}) {
    DeviceAllocator alloc(0);
    DenseGemm gemm(alloc, s, p);
    const char* pname = p == Precision::tf32 ? "tf32" : "fp32";
    for (const Workload& w : workloads) {
      const double ms = time_step(gemm, w, alloc, s);
      const double tandem_ms = time_tandem_step(w, p, alloc, s);
      std::printf(
          "{\"bench\": \"mlp_step\", \"device\": \"%s\", \"workload\": \"%s\", \"precision\": "
          "\"%s\", \"batch\": %lld, \"step_ms\": %.4f, \"tflops\": %.1f, "
          "\"tandem_step_ms\": %.4f}\n",
          prop.name, w.name, pname, static_cast<long long>(w.batch), ms,
          step_flops(w) / (ms * 1e-3) / 1e12, tandem_ms);
      rows.push_back({w.name, pname, ms, tandem_ms, -1});
    }
  }
  cudaStreamDestroy(s);

  // PyTorch's whole training step for the same models (its own script prints one JSON line each).
  const char* src = std::getenv("TANDEM_BENCH_DIR");
  const std::string script = std::string(src ? src : "bench") + "/seed_mlp_torch_gpu.py";
  const std::string cmd = "python3 " + script + " 2>&1";
  if (FILE* pipe = popen(cmd.c_str(), "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, pipe)) {
      std::fputs(line, stdout);
      char workload[64] = {}, precision[16] = {};
      double ms = 0;
      if (std::sscanf(line,
                      "{\"bench\": \"torch_step\", \"workload\": \"%63[^\"]\", \"precision\": "
                      "\"%15[^\"]\", \"step_ms\": %lf",
                      workload, precision, &ms) == 3)
        for (Row& r : rows)
          if (r.name == workload && r.precision == precision) r.torch_ms = ms;
    }
    pclose(pipe);
  }
  std::printf("\n%-12s %-5s %9s %10s %11s %13s %15s\n", "workload", "prec", "floor ms", "Tandem ms",
              "PyTorch ms", "floor/Tandem", "PyTorch/Tandem");
  for (const Row& r : rows)
    std::printf("%-12s %-5s %9.3f %10.3f %11.3f %12.0f%% %14.2fx\n", r.name.c_str(),
                r.precision.c_str(), r.floor_ms, r.tandem_ms, r.torch_ms,
                100 * r.floor_ms / r.tandem_ms, r.torch_ms > 0 ? r.torch_ms / r.tandem_ms : 0.0);
  return 0;
}
