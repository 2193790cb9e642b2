// The devices dock: the CPU and each CUDA GPU with live bars, or why there is no GPU.
#pragma once

#include <vector>

#include <QString>
#include <QWidget>

#include "device_snapshot.hpp"

class QLabel;
class QProgressBar;
class QVBoxLayout;

namespace tandem::gui {

/// Shows DeviceSnapshots as they arrive (typically from a DeviceMonitor, once a second). GPU rows
/// are rebuilt only when the set of GPUs (index, name, memory) changes; otherwise their widgets
/// are updated in place. Sized for a dock 350-450 px wide; scrolls vertically when tall.
/// GUI-thread only, like every widget. Child widgets are owned by the panel; the pointers the
/// accessors return stay valid until the next show_snapshot() that changes the GPU set.
class DevicesPanel : public QWidget {
  Q_OBJECT

 public:
  explicit DevicesPanel(QWidget* parent = nullptr);

  /// Displays a reading; clears an error shown by show_error().
  void show_snapshot(const DeviceSnapshot& snapshot);
  /// Displays `message` (e.g. DeviceMonitor::failed) in the status box and greys out the last
  /// readings, which are now stale. The next show_snapshot() replaces it.
  void show_error(const QString& message);
  /// Lists what each device holds in the shown run (RunHistory::placement_lines: its replica,
  /// pipeline stage and layers) under the readings; hidden when `lines` is empty.
  void show_placement(const QStringList& lines);

  // For tests and for callers that want to inspect what is shown.
  int gpu_row_count() const { return static_cast<int>(gpu_rows_.size()); }
  /// The status box text: the no-GPU reason, an error, or empty when it is hidden.
  QString status_text() const;
  /// Why live GPU readings are missing (NVML), shown under the GPUs; empty when hidden.
  QString nvml_note_text() const;
  /// The shown run's placement, one device per line; empty when hidden.
  QString placement_text() const;
  QProgressBar* cpu_utilisation_bar() const { return cpu_utilisation_; }
  QProgressBar* cpu_memory_bar() const { return cpu_memory_; }
  /// The widgets of GPU row `row` (0-based, in the engine's order); nullptr when out of range.
  QLabel* gpu_title_label(int row) const;
  QProgressBar* gpu_utilisation_bar(int row) const;
  QProgressBar* gpu_memory_bar(int row) const;
  /// Range 0-100 °C; its bool property "hot" is true above 80 °C, when it is drawn amber.
  QProgressBar* gpu_temperature_bar(int row) const;
  QLabel* gpu_power_label(int row) const;

 private:
  struct GpuRow {
    QWidget* container = nullptr;  // owned by gpu_area_; holds the widgets below
    QLabel* title = nullptr;
    QProgressBar* utilisation = nullptr;
    QProgressBar* memory = nullptr;
    QProgressBar* temperature = nullptr;
    QLabel* power = nullptr;
  };

  void rebuild_gpu_rows(const std::vector<GpuReading>& gpus);
  void update_gpu_row(const GpuRow& row, const GpuReading& gpu);
  void set_status(const QString& text, bool is_error);
  const GpuRow* row_at(int row) const;

  QWidget* readings_ = nullptr;  // CPU and GPU sections: disabled while an error is shown
  QLabel* cpu_title_ = nullptr;
  QProgressBar* cpu_utilisation_ = nullptr;
  QProgressBar* cpu_memory_ = nullptr;
  QWidget* gpu_area_ = nullptr;
  QVBoxLayout* gpu_layout_ = nullptr;
  std::vector<GpuRow> gpu_rows_;
  std::vector<GpuReading> gpu_set_;  // identity (index, name, memory) of the GPUs in gpu_rows_
  QLabel* status_ = nullptr;
  QLabel* nvml_note_ = nullptr;
  QLabel* updated_ = nullptr;
  QWidget* placement_ = nullptr;  // title and list, hidden without a run
  QLabel* placement_list_ = nullptr;
};

}  // namespace tandem::gui
