// terminate_on_nan: Keras TerminateOnNaN — stops training when a batch's loss is NaN or infinite,
// printing Keras' line. With "raise_error" (Keras 3) the run fails instead: the trainer's own
// failure for a non-finite loss, which saves the step before as a resumable model.h5 (a failure
// thrown from here would lose it).
#include <cmath>
#include <cstdio>

#include "tandem/plugin.hpp"

namespace {

class TerminateOnNan : public tandem::Callback {
 public:
  explicit TerminateOnNan(bool raise_error) : raise_error_(raise_error) {}
  std::string name() const override { return "terminate_on_nan"; }
  void on_train_batch_end(tandem::CallbackContext& ctx, std::int64_t batch,
                          const tandem::Logs& logs) override {
    const auto loss = logs.get("loss");
    if (!loss || std::isfinite(*loss) || raise_error_) return;
    std::fprintf(stderr, "Batch %lld: Invalid loss, terminating training\n",
                 static_cast<long long>(batch));  // Keras' words, its 0-based batch
    const std::string what = "batch " + std::to_string(batch + 1) + " of epoch " +
                             std::to_string(ctx.state().epoch + 1) + ": invalid loss " +
                             (std::isnan(*loss) ? "NaN" : "inf");
    ctx.request_stop("terminate_on_nan: " + what);
  }

 private:
  bool raise_error_;
};

class TerminateOnNanPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"terminate_on_nan",
            "1.0.0",
            "Stops training when the loss becomes NaN or infinite (Keras TerminateOnNaN)",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"raise_error",
                {{"type", "boolean"},
                 {"default", false},
                 {"description",
                  "fail the run (exit 1, the step before saved) instead of stopping it"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<TerminateOnNan>(options.at("raise_error").get<bool>());
  }
};

}  // namespace

TANDEM_PLUGIN(TerminateOnNanPlugin)
