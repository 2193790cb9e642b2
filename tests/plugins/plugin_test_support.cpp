#include "plugins/plugin_test_support.hpp"

#include <cmath>
#include <fstream>

#include "test_support.hpp"

namespace tandem::test {

using nlohmann::json;

void TableDataset::read(std::span<const std::int64_t> indices, float* x, float* y) const {
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const auto i = indices[k];
    Rng rng(Rng::derive(99, static_cast<std::uint64_t>(i)));
    for (int f = 0; f < 4; ++f) x[k * 4 + f] = rng.uniform() * 2 - 1;
    y[k] = static_cast<float>((x[k * 4] > 0) + (x[k * 4 + 1] > 0.5f));
    if (poison_ > 0 && i >= poison_) x[k * 4] = std::nanf("");
  }
}

json model_config() {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "Dense"},
               {"config", {{"units", 16}, {"activation", "relu"}, {"input_shape", {4}}}}},
              {{"class_name", "Dense"}, {"config", {{"units", 3}}}}}}}}};
}

PluginRun::PluginRun(const std::string& plan_text, double learning_rate, std::uint64_t seed,
                     const json& optimizer_spec)
    : run_dir(scratch_dir("plugin-run")) {
  model = Model::from_config(model_config(), "model", seed);
  loss = make_loss(
      json{{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}},
      "loss");
  optimizer = make_optimizer(
      optimizer_spec.is_null()
          ? json{{"class_name", "Adam"}, {"config", {{"learning_rate", learning_rate}}}}
          : optimizer_spec,
      "optimizer");
  const int n = std::stoi(plan_text.substr(plan_text.find(':') + 1));
  meta = std::make_unique<ReplicaModel>(*model, *optimizer, DevicePlan::cpus(n));
  metrics = make_metrics(json::array({"accuracy"}), "metrics", *loss, {3});
  trainer = std::make_unique<Trainer>(*meta, Objective::borrowing(*loss, metrics));
  events = std::make_unique<EventSink>();
  events->open_file(run_dir / "events.jsonl");
  trainer->set_event_sink(events.get());
  trainer->set_run_dir(run_dir);
}

std::shared_ptr<Callback> PluginRun::add(const std::string& name, const json& options,
                                         Target target) {
  LoadedPlugin p = host.load(name);
  auto cb =
      p.create(options, {target, "callbacks[" + std::to_string(bus.callbacks().size()) + "]"});
  bus.add(cb, target);
  return cb;
}

const std::vector<Logs>& PluginRun::fit(std::shared_ptr<Dataset> train,
                                        std::shared_ptr<Dataset> validation, int epochs,
                                        std::int64_t batch) {
  trainer->set_callbacks(bus);
  static std::vector<std::unique_ptr<DataLoader>>
      keep;  // loaders outlive the call for resume tests
  keep.push_back(std::make_unique<DataLoader>(train, DataLoaderOptions{batch, true, 5, 0}));
  DataLoader* val = nullptr;
  if (validation) {
    keep.push_back(std::make_unique<DataLoader>(validation, DataLoaderOptions{batch, false, 0, 0}));
    val = keep.back().get();
  }
  return trainer->fit(*keep[keep.size() - (validation ? 2 : 1)], val, {epochs});
}

std::vector<json> read_events(const std::filesystem::path& run_dir) {
  std::vector<json> out;
  std::ifstream in(run_dir / "events.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

}  // namespace tandem::test
