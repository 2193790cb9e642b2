// Helpers for plugin tests: a small model and data, a trainer wired to plugins loaded from the
// build tree through the real PluginHost, and the run folder they write into.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugin/plugin_host.hpp"
#include "train/trainer.hpp"

namespace tandem::test {

/// x = 4 features in [-1, 1), y = class index (3 classes) from a fixed rule. `poison_after` > 0
/// makes every sample with index >= poison_after contain NaN.
class TableDataset : public Dataset {
 public:
  explicit TableDataset(std::int64_t n, std::int64_t poison_after = 0)
      : n_(n), poison_(poison_after) {}
  std::int64_t size() const override { return n_; }
  Shape x_shape() const override { return {4}; }
  Shape y_shape() const override { return {}; }
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override;
  std::string describe() const override { return "table"; }

 private:
  std::int64_t n_, poison_;
};

/// Dense 4 -> 16 relu -> Dense 3 logits, sparse CE, Adam, accuracy; on `plan_text` (cpu:N).
/// `optimizer`: another optimizer spec than Adam at `learning_rate` (null: Adam).
struct PluginRun {
  explicit PluginRun(const std::string& plan_text = "cpu:1", double learning_rate = 0.01,
                     std::uint64_t seed = 3, const nlohmann::json& optimizer = nullptr);
  /// Loads plugin `name` from the build tree and adds its callback with `options` and `target`.
  std::shared_ptr<Callback> add(const std::string& name, const nlohmann::json& options,
                                Target target = Target::template_model);
  /// Fits `epochs` epochs on `train` (and `validation` when given), batch `batch`, prefetch 0.
  const std::vector<Logs>& fit(std::shared_ptr<Dataset> train, std::shared_ptr<Dataset> validation,
                               int epochs, std::int64_t batch = 8);

  std::filesystem::path run_dir;
  std::unique_ptr<Model> model;
  std::unique_ptr<Loss> loss;
  std::vector<std::unique_ptr<Metric>> metrics;  // the trainer borrows them
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<ReplicaModel> meta;
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<EventSink> events;
  CallbackBus bus;
  PluginHost host;
};

nlohmann::json model_config();
/// The events written so far to run_dir/events.jsonl, parsed.
std::vector<nlohmann::json> read_events(const std::filesystem::path& run_dir);

}  // namespace tandem::test
