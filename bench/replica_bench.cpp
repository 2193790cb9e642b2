// replica_bench: the cost and the scaling of the meta-model on the CPU (issue "Devices and the
// replica meta-model", item 7). For fashion-mlp (batch 128) and seed-mlp (batch 256), on random
// in-memory data, it times full training steps three ways, interleaved round by round so drift in
// the machine hits all three alike:
//   bare   - the template alone: forward, loss, backward, optimizer (no ReplicaModel)
//   cpu:1  - the same through ReplicaModel with one replica (the Trainer's path)
//   cpu:2  - two replicas sharing the two cores
// and prints a markdown table: samples/s (median of the rounds), the meta-model's overhead over
// the bare step, and the cpu:2 / cpu:1 ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "util/process_setup.hpp"
#include "parallel/replica_model.hpp"
#include "train/run_config.hpp"

namespace {

using namespace tandem;
using Clock = std::chrono::steady_clock;

struct Run {
  std::unique_ptr<Model> model;
  std::unique_ptr<Loss> loss;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<std::unique_ptr<Metric>> metrics;
  std::unique_ptr<ReplicaModel> meta;  // null for the bare template
  Tensor grad;

  Run(const RunConfig& rc, int replicas) {
    model = Model::from_config(rc.model, "model", rc.seed);
    loss = make_loss(rc.loss, "loss");
    optimizer = make_optimizer(rc.optimizer, "optimizer");
    metrics = make_metrics(rc.metrics, "metrics", *loss, model->output_shape());
    if (replicas > 0)
      meta = std::make_unique<ReplicaModel>(*model, *optimizer, DevicePlan::cpus(replicas));
  }

  void step(const Batch& b) {
    if (meta) {
      meta->forward_backward(b, *loss, metrics);
      meta->apply_update();
      return;
    }
    const Tensor& out = model->forward(b.x, true);
    loss->compute(out, b.y, 1.0f / static_cast<float>(b.size()), &grad);
    for (const auto& m : metrics) m->evaluate(out, b.y);
    model->backward(grad);
    optimizer->apply(model->trainable_parameters());
  }
};

Batch random_batch(const Model& model, std::int64_t n, bool binary) {
  Batch b;
  Shape xs{n};
  for (auto d : model.input_shape()) xs.push_back(d);
  b.x = Tensor(xs);
  Rng rng(1);
  for (std::int64_t i = 0; i < b.x.size(); ++i) b.x[i] = rng.uniform();
  b.y = binary ? Tensor({n, 1}) : Tensor({n});
  for (std::int64_t i = 0; i < b.y.size(); ++i)
    b.y[i] = static_cast<float>(rng.below(binary ? 2 : 10));
  return b;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void bench(const char* name, const std::string& config, std::int64_t batch, int steps, int rounds,
           bool binary) {
  RunConfig rc = parse_run_config(load_json_file(config), "");
  std::vector<Run> runs;
  runs.emplace_back(rc, 0);
  runs.emplace_back(rc, 1);
  runs.emplace_back(rc, 2);
  const Batch b = random_batch(*runs[0].model, batch, binary);
  for (auto& r : runs)
    for (int i = 0; i < 2; ++i) r.step(b);  // warm-up: caches, primitives, optimizer slots
  std::vector<std::vector<double>> rates(runs.size());
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const auto t0 = Clock::now();
      for (int i = 0; i < steps; ++i) runs[k].step(b);
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      rates[k].push_back(static_cast<double>(batch * steps) / secs);
    }
  }
  const double bare = median(rates[0]), one = median(rates[1]), two = median(rates[2]);
  std::printf("| %s (batch %lld) | %.0f | %.0f | %+.1f%% | %.0f | %.2fx |\n", name,
              static_cast<long long>(batch), bare, one, 100.0 * (bare / one - 1.0), two, two / one);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  configure_process(argc, argv);
  const std::string configs = std::string(TANDEM_SOURCE_DIR) + "/resources/configs/";
  std::printf(
      "| workload | bare template samples/s | meta cpu:1 samples/s | meta overhead | "
      "meta cpu:2 samples/s | cpu:2 / cpu:1 |\n|---|---:|---:|---:|---:|---:|\n");
  bench("fashion-mlp", configs + "fashion-mlp.json", 128, 200, 9, false);
  bench("seed-mlp", configs + "seed-mlp.json", 256, 3, 5, true);
  return 0;
}
