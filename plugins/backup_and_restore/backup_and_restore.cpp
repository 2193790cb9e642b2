// backup_and_restore: Keras BackupAndRestore — fault tolerance for a fit that may die.
//
// It keeps one resumable checkpoint, <backup_dir>/backup.h5 (weights + optimizer slots + epoch,
// step, history, RNG states: target().checkpoint(true)), rewritten at every epoch end
// (save_freq "epoch") or after every N-th optimizer step (save_freq N). Writes are atomic
// (temporary file, flush, rename), so a crash at any moment leaves the previous backup whole.
// At train begin, if a backup exists, it is restored into the run (CallbackContext::restore) and
// training continues from that epoch and batch: the result equals an uninterrupted run's.
// At the end of a run that finished (all epochs, or stopped by a callback at an epoch end) the
// backup is deleted when delete_checkpoint is set, and backup_dir too when that leaves it empty.
// A run cut in the middle of an epoch (SIGINT/SIGTERM, a non-finite loss) writes a backup of
// that moment instead and keeps it. Only rank 0 writes; every rank restores.
#include <chrono>
#include <filesystem>
#include <string>

#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

using nlohmann::json;
using tandem::CallbackContext;
using tandem::Logs;

class BackupAndRestore : public tandem::Callback {
 public:
  BackupAndRestore(std::filesystem::path dir, std::int64_t every_n_steps, bool delete_checkpoint)
      : dir_(std::move(dir)), every_(every_n_steps), delete_(delete_checkpoint) {}
  std::string name() const override { return "backup_and_restore"; }

  void on_train_begin(CallbackContext& ctx, const Logs&) override {
    const auto path = file();
    if (!std::filesystem::exists(path)) return;
    const auto data = tandem::read_checkpoint_file(path);
    ctx.restore(data, path.string());
    const auto& st = ctx.state();
    ctx.publish(
        "backup_restored",
        {{"path", path.string()}, {"epoch", st.epoch + 1}, {"batch", st.batch}, {"step", st.step}});
  }

  void on_train_batch_end(CallbackContext& ctx, std::int64_t, const Logs&) override {
    if (every_ > 0 && ctx.state().step % every_ == 0) save(ctx, "batch");
  }

  void on_epoch_end(CallbackContext& ctx, int, const Logs&) override {
    if (every_ == 0) save(ctx, "epoch");
  }

  void on_train_end(CallbackContext& ctx, const Logs&) override {
    if (ctx.rank() != 0) return;
    if (ctx.state().batch > 0) {  // cut mid-epoch: keep a backup of this very moment
      save(ctx, "interrupted");
      return;
    }
    if (!delete_) return;
    std::error_code ec;
    std::filesystem::remove(file(), ec);
    if (std::filesystem::is_directory(dir_, ec) && std::filesystem::is_empty(dir_, ec))
      std::filesystem::remove(dir_, ec);
  }

 private:
  std::filesystem::path file() const { return dir_ / "backup.h5"; }

  void save(CallbackContext& ctx, const char* reason) {
    if (ctx.rank() != 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec)
      throw tandem::RunError("backup_and_restore: cannot create " + dir_.string() + ": " +
                             ec.message());
    const auto path = file();
    tandem::write_checkpoint_file(path, ctx.target().checkpoint(true));
    const auto& st = ctx.state();
    ctx.publish("backup_saved",
                {{"path", path.string()},
                 {"epoch", st.epoch + 1},
                 {"step", st.step},
                 {"monitor", nullptr},
                 {"value", nullptr},
                 {"best", false},
                 {"target", tandem::target_name(ctx.target().target())},
                 {"reason", reason},
                 {"bytes", std::filesystem::file_size(path, ec)},
                 {"seconds",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}});
  }

  std::filesystem::path dir_;
  std::int64_t every_;  // 0: every epoch
  bool delete_;
};

class BackupAndRestorePlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    json props = {{"backup_dir",
                   {{"type", "string"},
                    {"minLength", 1},
                    {"description",
                     "folder of the backup (relative to the working directory, as Keras); "
                     "use one folder per run"}}},
                  {"save_freq",
                   {{"type", json::array({"string", "integer"})},
                    {"minimum", 1},
                    {"maximum", std::int64_t{1} << 53},
                    {"default", "epoch"},
                    {"description", "\"epoch\", or N: back up after every N-th optimizer step"}}},
                  {"delete_checkpoint",
                   {{"type", "boolean"},
                    {"default", true},
                    {"description", "delete the backup when training finishes"}}}};
    return {"backup_and_restore",
            "1.0.0",
            "Backs up the training state and resumes from it after a crash (Keras "
            "BackupAndRestore)",
            {{"type", "object"},
             {"additionalProperties", false},
             {"required", json::array({"backup_dir"})},
             {"properties", props}}};
  }

  std::shared_ptr<tandem::Callback> create(const json& options,
                                           const tandem::CallbackSetup& setup) const override {
    const json& freq = options.at("save_freq");
    std::int64_t every = 0;
    if (freq.is_string()) {
      if (freq.get<std::string>() != "epoch")
        throw tandem::ConfigError(
            setup.config_path + ".options.save_freq",
            "expected \"epoch\" or a number of batches >= 1, got " + freq.dump());
    } else {
      every = static_cast<std::int64_t>(freq.get<double>());
      if (every < 1)
        throw tandem::ConfigError(
            setup.config_path + ".options.save_freq",
            "expected \"epoch\" or a number of batches >= 1, got " + freq.dump());
    }
    return std::make_shared<BackupAndRestore>(options.at("backup_dir").get<std::string>(), every,
                                              options.at("delete_checkpoint").get<bool>());
  }
};

}  // namespace

TANDEM_PLUGIN(BackupAndRestorePlugin)
