// gpu_train_steps: whole training steps of the engine on cuda:0 — ReplicaModel::forward_backward
// and apply_update — for seed-mlp (batch 8192, Adam, binary cross-entropy), fashion-mlp and
// fashion-cnn (batch 128, Adam, sparse categorical cross-entropy from logits), in fp32, tf32,
// bf16 and fp16 (Adam inside a dynamic LossScaleOptimizer, as Keras runs mixed_float16), two
// ways:
//   resident  one batch, named as its own next batch: the replica keeps its device copy, so the
//             step has its data on the device, as PyTorch's has;
//   host      three different batches in pinned host memory (as the loader hands them over to a
//             GPU plan), each step naming the next: its copy to the device overlaps the step (the
//             trainer's look-ahead). The issue asks host >= 90% of resident for seed-mlp.
// Then PyTorch's whole step on the same GPU with its data already there
// (bench/seed_mlp_torch_gpu.py; bf16 and fp16 under autocast, fp16 with a GradScaler), and the
// ratio. Median of 30 steps after 10 warm-up steps (which
// include the CUDA graphs' capture).
//
// Run by scripts/gpu-check on a GPU machine; without a device it says so and measures nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "parallel/pinned_memory.hpp"
#include "tandem/devices.hpp"
#include "parallel/replica_model.hpp"

using namespace tandem;
using nlohmann::json;

namespace {

json dense(int units, const char* activation) {
  return {{"class_name", "Dense"}, {"config", {{"units", units}, {"activation", activation}}}};
}

json sequential(const std::vector<std::int64_t>& input, json layers) {
  json shape = json::array({nullptr});
  for (auto d : input) shape.push_back(d);
  layers[0]["config"]["batch_input_shape"] = shape;
  return {{"class_name", "Sequential"}, {"config", {{"layers", layers}}}};
}

struct Workload {
  std::string name;
  json model;
  std::vector<std::int64_t> input;
  std::int64_t batch;
  json loss;
  bool binary;
};

std::vector<Workload> workloads() {
  const json scce = {{"class_name", "SparseCategoricalCrossentropy"},
                     {"config", {{"from_logits", true}}}};
  const json conv1 = {{"class_name", "Conv2D"},
                      {"config", {{"filters", 32}, {"kernel_size", 3}, {"activation", "relu"}}}};
  const json conv2 = {{"class_name", "Conv2D"},
                      {"config", {{"filters", 64}, {"kernel_size", 3}, {"activation", "relu"}}}};
  const json pool = {{"class_name", "MaxPooling2D"}, {"config", {{"pool_size", 2}}}};
  const json flatten = {{"class_name", "Flatten"}, {"config", json::object()}};
  return {
      {"seed-mlp",
       sequential({8000}, json::array({dense(4000, "tanh"), dense(2000, "relu"), dense(500, "relu"),
                                       dense(300, "relu"), dense(1, "linear")})),
       {8000},
       8192,
       {{"class_name", "BinaryCrossentropy"}, {"config", {{"from_logits", true}}}},
       true},
      {"fashion-mlp",
       sequential({28, 28}, json::array({flatten, dense(256, "relu"), dense(128, "relu"),
                                         dense(10, "linear")})),
       {28, 28},
       128,
       scce,
       false},
      {"fashion-cnn",
       sequential({28, 28, 1}, json::array({conv1, pool, conv2, pool, flatten, dense(128, "relu"),
                                            dense(10, "linear")})),
       {28, 28, 1},
       128,
       scce,
       false},
  };
}

struct Row {
  std::string name, precision;
  double resident_ms = 0, host_ms = 0, torch_ms = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const DeviceReport report = discover_devices();
  if (report.gpus.empty()) {
    std::printf("gpu_train_steps: no CUDA device (%s); nothing measured\n",
                report.gpu_status.c_str());
    return 0;
  }
  std::vector<Row> rows;
  for (const Workload& w : workloads())
    for (Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16,
                                Precision::fp16}) {
      auto model = Model::from_config(w.model, "model", 1);
      const json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 1e-4}}}};
      // fp16 as Keras (and `tandem train`) runs it: Adam inside a dynamic LossScaleOptimizer.
      auto optimizer = make_optimizer(
          precision == Precision::fp16
              ? json{{"class_name", "LossScaleOptimizer"}, {"config", {{"inner_optimizer", adam}}}}
              : adam,
          "optimizer");
      auto loss = make_loss(w.loss, "loss");
      std::vector<std::unique_ptr<Metric>> metrics;
      ReplicaModel meta(*model, *optimizer, parse_device_plan("cuda:0", report, "devices", true),
                        single_process_world(), precision);
      // Three batches in pinned memory (ordinary memory if pinning fails), as a GPU plan's
      // loader makes them.
      const auto pinned = detail::pinned_batch_storage();
      std::vector<Batch> batches(3);
      Rng rng(5);
      for (Batch& b : batches) {
        std::vector<std::int64_t> xs{w.batch};
        xs.insert(xs.end(), w.input.begin(), w.input.end());
        const Shape ys = w.binary ? Shape{w.batch, 1} : Shape{w.batch};
        b.x = pinned ? Tensor::adopt(xs, pinned(shape_size(xs))) : Tensor(xs);
        b.y = pinned ? Tensor::adopt(ys, pinned(shape_size(ys))) : Tensor(ys);
        for (std::int64_t i = 0; i < b.x.size(); ++i) b.x[i] = rng.uniform() * 2 - 1;
        for (std::int64_t i = 0; i < b.y.size(); ++i)
          b.y[i] = static_cast<float>(rng.below(w.binary ? 2 : 10));
      }
      const auto median_step_ms = [&](bool resident) {
        std::vector<double> ms;
        for (int step = 0; step < 40; ++step) {
          const Batch& b = batches[resident ? 0 : step % 3];
          const Batch& next = batches[resident ? 0 : (step + 1) % 3];
          const auto t0 = std::chrono::steady_clock::now();
          meta.forward_backward(b, *loss, metrics, &next);
          meta.apply_update();
          const auto t1 = std::chrono::steady_clock::now();
          if (step >= 10) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        return median(ms);
      };
      Row row{w.name, precision_name(precision)};
      row.resident_ms = median_step_ms(true);
      row.host_ms = median_step_ms(false);
      rows.push_back(row);
      for (const bool resident : {true, false})
        std::printf(
            "{\"bench\": \"tandem_step\", \"workload\": \"%s\", \"precision\": \"%s\", "
            "\"step_ms\": %.4f, \"batch\": %lld, \"data\": \"%s\"}\n",
            w.name.c_str(), row.precision.c_str(), resident ? row.resident_ms : row.host_ms,
            static_cast<long long>(w.batch), resident ? "device" : "host");
      std::fflush(stdout);
    }

  const char* src = std::getenv("TANDEM_BENCH_DIR");
  std::string cmd = "python3 " + std::string(src ? src : "bench") + "/seed_mlp_torch_gpu.py 2>&1";
  // scripts/gpu-check runs this benchmark with Tandem's bundled libraries first on the path;
  // PyTorch gets the machine's own.
  if (const char* path = std::getenv("TANDEM_BENCH_PYTHON_LD_LIBRARY_PATH"))
    cmd = "env LD_LIBRARY_PATH='" + std::string(path) + "' " + cmd;
  if (FILE* pipe = popen(cmd.c_str(), "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, pipe)) {
      std::fputs(line, stdout);
      char workload[64] = {}, precision[16] = {};
      double value = 0;
      if (std::sscanf(line,
                      "{\"bench\": \"torch_step\", \"workload\": \"%63[^\"]\", \"precision\": "
                      "\"%15[^\"]\", \"step_ms\": %lf",
                      workload, precision, &value) == 3)
        for (Row& r : rows)
          if (r.name == workload && r.precision == precision) r.torch_ms = value;
    }
    pclose(pipe);
  }
  std::printf("\n%-12s %-5s %12s %12s %10s %12s %14s\n", "workload", "prec", "Tandem dev",
              "Tandem host", "host/dev", "PyTorch dev", "PyTorch/Tandem");
  for (const Row& r : rows)
    std::printf("%-12s %-5s %9.3f ms %9.3f ms %9.1f%% %9.3f ms %13.2fx\n", r.name.c_str(),
                r.precision.c_str(), r.resident_ms, r.host_ms, 100.0 * r.resident_ms / r.host_ms,
                r.torch_ms, r.torch_ms > 0 ? r.torch_ms / r.resident_ms : 0.0);
  return 0;
}
