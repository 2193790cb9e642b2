// terminate_on_nan: Keras TerminateOnNaN — stops training when a batch's loss is NaN or infinite.
// With "raise_error" (Keras 3) the run fails instead of stopping cleanly.
#include <cmath>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

class TerminateOnNan : public tandem::Callback {
 public:
  explicit TerminateOnNan(bool raise_error) : raise_error_(raise_error) {}
  std::string name() const override { return "terminate_on_nan"; }
  void on_train_batch_end(tandem::CallbackContext& ctx, std::int64_t batch,
                          const tandem::Logs& logs) override {
    const auto loss = logs.get("loss");
    if (!loss || std::isfinite(*loss)) return;
    const std::string what = "batch " + std::to_string(batch + 1) + " of epoch " +
                             std::to_string(ctx.state().epoch + 1) + ": invalid loss " +
                             (std::isnan(*loss) ? "NaN" : "inf");
    if (raise_error_) throw tandem::RunError("terminate_on_nan: " + what);
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
                 {"description", "fail the run instead of stopping it"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<TerminateOnNan>(options.at("raise_error").get<bool>());
  }
};

}  // namespace

TANDEM_PLUGIN(TerminateOnNanPlugin)
