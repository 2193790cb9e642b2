// One reading of the machine's devices, as `tandem devices --json [--watch]` prints it.
//
// Plain data, copyable, no Qt object behind it: safe to pass between threads by value. The
// parsers never throw or crash on odd input: what is missing, null or of the wrong type becomes
// "unknown" (an empty std::optional, an empty string).
#pragma once

#include <optional>
#include <vector>

#include <QByteArray>
#include <QDateTime>
#include <QJsonObject>
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace tandem::gui {

/// One CUDA GPU: facts from the engine's "gpus" entry joined with its live "sample.gpus" entry.
struct GpuReading {
  int index = 0;  // CUDA ordinal: the device is "cuda:<index>"
  QString name;   // "NVIDIA H100 80GB HBM3"; empty when unknown
  std::optional<qint64> memory_total_bytes;
  std::optional<qint64> memory_used_bytes;
  std::optional<double> utilization_percent;  // 0..100
  std::optional<double> temperature_c;
  std::optional<double> power_w;

  QString device() const { return QStringLiteral("cuda:%1").arg(index); }
  bool operator==(const GpuReading&) const = default;
};

struct DeviceSnapshot {
  // CPU ("cpu" and "sample.cpu").
  QString cpu_model;  // "AMD EPYC"; empty when unknown
  std::optional<int> cpu_cores;
  std::optional<qint64> memory_total_bytes;
  std::optional<qint64> memory_used_bytes;
  std::optional<double> cpu_utilization_percent;  // 0..100

  // CUDA ("cuda").
  bool cuda_reported = false;               // the engine's output had a "cuda" object at all
  bool cuda_built = false;                  // this engine was built with CUDA support
  std::optional<int> cuda_runtime_version;  // 13000 for CUDA 13.0
  std::optional<int> cuda_driver_version;   // unknown when no driver is installed
  QString cuda_status;  // empty when GPUs were found, else the engine's reason ("no CUDA GPU: ...")

  std::vector<GpuReading> gpus;  // in the engine's order (by index)
  QString nvml_status;           // empty when NVML answered; else why live GPU readings are missing
  QDateTime time;                // when the sample was taken (UTC); invalid when unknown

  bool operator==(const DeviceSnapshot&) const = default;
};

/// True when `object` is recognisably the output of `tandem devices --json`: a "gpus" array
/// and a "cpu" or "cuda" object. Anything else must not be shown as a reading.
bool is_device_report(const QJsonObject& object);

/// Reads one `tandem devices --json` object. Tolerant: missing, null or mistyped fields become
/// unknown; a GPU entry without a usable index (neither "index" nor a "cuda:N" "device") is left
/// out, as is a second entry for the same index; sample entries match GPUs by index.
DeviceSnapshot parse_device_snapshot(const QJsonObject& object);

/// One line of `--watch` output: nullopt unless it is a JSON object passing is_device_report().
std::optional<DeviceSnapshot> parse_device_line(const QByteArray& line);

/// The engine's reason without its "no CUDA GPU: " prefix ("CUDA driver version is insufficient
/// for CUDA runtime version (error 35)"); empty when it gave none.
QString engine_gpu_reason(const DeviceSnapshot& snapshot);

/// The plain-language sentence to show when the snapshot has no GPU, e.g. "No CUDA driver on
/// this machine: ... Training runs on the CPU."; empty when there are GPUs.
QString no_gpu_reason(const DeviceSnapshot& snapshot);

/// Device plans worth offering in a picker, best first: "auto", "cpu", "cpu:N" for a few N up
/// to the core count, then "cuda:<i>" per GPU and "cuda:all" when there are two or more.
/// Multi-GPU subsets ("cuda:0,2") are valid plans too but are left to free text.
QStringList device_plan_choices(const DeviceSnapshot& snapshot);

/// "23.5 GiB" style text for a byte count; "–" when unknown or negative.
QString format_gib(std::optional<qint64> bytes);

}  // namespace tandem::gui

Q_DECLARE_METATYPE(tandem::gui::DeviceSnapshot)
