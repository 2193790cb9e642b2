// progress: the console progress bar (stderr), Keras-style, with ETA and samples/s.
// verbose 1 redraws one line per epoch in place (when stderr is a terminal; else it acts as 2),
// verbose 2 prints one line per epoch. Validation inside fit shows no bar (as Keras); a plain
// evaluate shows one.
#include <cstdio>
#include <memory>
#include <optional>

#include "progress/progress_bar.hpp"
#include "tandem/plugin.hpp"

namespace {

using tandem::CallbackContext;
using tandem::Logs;

class Progress : public tandem::Callback {
 public:
  explicit Progress(int verbose) : verbose_(verbose) {}
  std::string name() const override { return "progress"; }

  void on_train_begin(CallbackContext&, const Logs&) override { in_fit_ = true; }
  void on_train_end(CallbackContext&, const Logs&) override { in_fit_ = false; }

  void on_epoch_begin(CallbackContext& ctx, int epoch, const Logs&) override {
    const auto& st = ctx.state();
    if (st.batch > 0)
      std::fprintf(stderr, "Epoch %d/%d (resumed at batch %lld)\n", epoch + 1, st.epochs,
                   static_cast<long long>(st.batch));
    else
      std::fprintf(stderr, "Epoch %d/%d\n", epoch + 1, st.epochs);
    bar_.emplace(verbose_, st.steps_per_epoch);
    samples_per_sec_ = 0;
    done_ = st.batch;
  }

  void on_event(CallbackContext&, const std::string& event, const nlohmann::json& fields) override {
    if (event == "batch_ended" || event == "epoch_ended")
      samples_per_sec_ = fields.value("samples_per_sec", 0.0);
  }

  void on_train_batch_end(CallbackContext& ctx, std::int64_t batch, const Logs& logs) override {
    (void)ctx;
    done_ = batch + 1;
    if (bar_) bar_->update(done_, logs, samples_per_sec_);
  }

  void on_epoch_end(CallbackContext&, int, const Logs& logs) override {
    // The batches this epoch ran: all of them, or fewer when a callback stopped the run.
    if (bar_) bar_->finish(done_, logs, samples_per_sec_);
    bar_.reset();
  }

  void on_test_begin(CallbackContext&, const Logs&) override {
    test_batches_ = 0;
    if (!in_fit_) test_bar_.emplace(verbose_, 0);
  }
  void on_test_batch_end(CallbackContext&, std::int64_t batch, const Logs& logs) override {
    test_batches_ = batch + 1;
    if (test_bar_) test_bar_->update(test_batches_, logs);
  }
  void on_test_end(CallbackContext&, const Logs& logs) override {
    if (test_bar_) test_bar_->finish(test_batches_, logs);
    test_bar_.reset();
  }

 private:
  int verbose_;
  bool in_fit_ = false;
  std::optional<tandem::ProgressBar> bar_, test_bar_;
  double samples_per_sec_ = 0;
  std::int64_t done_ = 0;  // batches of the current epoch done (counting a resume's skipped ones)
  std::int64_t test_batches_ = 0;
};

class ProgressPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"progress",
            "1.0.0",
            "Keras-style progress bar on stderr with ETA and samples/s",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"verbose",
                {{"type", "integer"},
                 {"enum", {1, 2}},
                 {"default", 1},
                 {"description", "1: one line redrawn in place; 2: one line per epoch"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<Progress>(options.at("verbose").get<int>());
  }
};

}  // namespace

TANDEM_PLUGIN(ProgressPlugin)
