#include "device_snapshot.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonParseError>
#include <QJsonValue>

namespace tandem::gui {

namespace {

// A finite JSON number; unknown for null, missing or any other type.
std::optional<double> number(const QJsonValue& value) {
  if (!value.isDouble()) return std::nullopt;
  const double v = value.toDouble();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

// A whole number in [min, max]; unknown otherwise (fractions, out of range, not a number).
template <typename Int>
std::optional<Int> whole(const QJsonValue& value, Int min = std::numeric_limits<Int>::min()) {
  const std::optional<double> v = number(value);
  // 2^53 bounds the integers a double holds exactly: a byte count is far below it.
  constexpr double max_exact = 9007199254740992.0;
  const double max = std::min(max_exact, static_cast<double>(std::numeric_limits<Int>::max()));
  if (!v || std::trunc(*v) != *v || *v < static_cast<double>(min) || *v > max) return std::nullopt;
  return static_cast<Int>(*v);
}

std::optional<qint64> bytes(const QJsonValue& value) {
  return whole<qint64>(value, 0);
}

QString text(const QJsonValue& value) {
  return value.isString() ? value.toString() : QString();
}

// The GPU's ordinal: "index", else the N of "device": "cuda:N".
std::optional<int> gpu_index(const QJsonObject& gpu) {
  if (std::optional<int> index = whole<int>(gpu.value("index"), 0)) return index;
  const QString device = text(gpu.value("device"));
  const QString prefix = QStringLiteral("cuda:");
  if (!device.startsWith(prefix)) return std::nullopt;
  bool ok = false;
  const int index = device.mid(prefix.size()).toInt(&ok);
  if (!ok || index < 0) return std::nullopt;
  return index;
}

void read_gpu_sample(const QJsonObject& sample, GpuReading& gpu) {
  gpu.utilization_percent = number(sample.value("utilization_percent"));
  gpu.memory_used_bytes = bytes(sample.value("memory_used_bytes"));
  gpu.temperature_c = number(sample.value("temperature_c"));
  gpu.power_w = number(sample.value("power_w"));
}

// "...(error 35)" -> "...(error 35)."; a sentence already ending in . ! ? stays as it is.
QString as_sentence(const QString& text) {
  if (text.isEmpty() || text.endsWith('.') || text.endsWith('!') || text.endsWith('?')) return text;
  return text + '.';
}

}  // namespace

bool is_device_report(const QJsonObject& object) {
  return object.value("gpus").isArray() &&
         (object.value("cpu").isObject() || object.value("cuda").isObject());
}

DeviceSnapshot parse_device_snapshot(const QJsonObject& object) {
  DeviceSnapshot snapshot;

  const QJsonObject cpu = object.value("cpu").toObject();
  snapshot.cpu_model = text(cpu.value("model_name"));
  snapshot.cpu_cores = whole<int>(cpu.value("logical_cores"), 1);
  snapshot.memory_total_bytes = bytes(cpu.value("memory_bytes"));

  const QJsonValue cuda_value = object.value("cuda");
  snapshot.cuda_reported = cuda_value.isObject();
  const QJsonObject cuda = cuda_value.toObject();
  snapshot.cuda_built = cuda.value("built").toBool(false);
  snapshot.cuda_runtime_version = whole<int>(cuda.value("runtime_version"), 1);
  snapshot.cuda_driver_version = whole<int>(cuda.value("driver_version"), 1);
  snapshot.cuda_status = text(cuda.value("status"));

  std::set<int> seen;
  for (const QJsonValue& entry : object.value("gpus").toArray()) {
    if (!entry.isObject()) continue;
    const QJsonObject gpu_object = entry.toObject();
    const std::optional<int> index = gpu_index(gpu_object);
    if (!index || !seen.insert(*index).second) continue;
    GpuReading gpu;
    gpu.index = *index;
    gpu.name = text(gpu_object.value("name"));
    gpu.memory_total_bytes = bytes(gpu_object.value("memory_bytes"));
    snapshot.gpus.push_back(std::move(gpu));
  }

  const QJsonObject sample = object.value("sample").toObject();
  const QJsonObject cpu_sample = sample.value("cpu").toObject();
  snapshot.cpu_utilization_percent = number(cpu_sample.value("utilization_percent"));
  snapshot.memory_used_bytes = bytes(cpu_sample.value("memory_used_bytes"));
  if (!snapshot.memory_used_bytes && snapshot.memory_total_bytes) {
    const std::optional<qint64> available = bytes(cpu_sample.value("memory_available_bytes"));
    if (available && *available <= *snapshot.memory_total_bytes)
      snapshot.memory_used_bytes = *snapshot.memory_total_bytes - *available;
  }
  for (const QJsonValue& entry : sample.value("gpus").toArray()) {
    if (!entry.isObject()) continue;
    const QJsonObject gpu_sample = entry.toObject();
    const std::optional<int> index = gpu_index(gpu_sample);
    if (!index) continue;
    for (GpuReading& gpu : snapshot.gpus)
      if (gpu.index == *index) read_gpu_sample(gpu_sample, gpu);
  }
  snapshot.nvml_status = text(sample.value("nvml_status"));
  const QString time = text(sample.value("time"));
  if (!time.isEmpty()) snapshot.time = QDateTime::fromString(time, Qt::ISODateWithMs);
  return snapshot;
}

std::optional<DeviceSnapshot> parse_device_line(const QByteArray& line) {
  QJsonParseError error{};
  const QJsonDocument document = QJsonDocument::fromJson(line, &error);
  if (error.error != QJsonParseError::NoError || !document.isObject()) return std::nullopt;
  const QJsonObject object = document.object();
  if (!is_device_report(object)) return std::nullopt;
  return parse_device_snapshot(object);
}

QString engine_gpu_reason(const DeviceSnapshot& snapshot) {
  QString reason = snapshot.cuda_status.trimmed();
  const QString prefix = QStringLiteral("no CUDA GPU:");
  if (reason.startsWith(prefix, Qt::CaseInsensitive)) reason = reason.mid(prefix.size()).trimmed();
  return reason;
}

QString no_gpu_reason(const DeviceSnapshot& snapshot) {
  if (!snapshot.gpus.empty()) return {};
  const QString on_cpu = QStringLiteral(" Training runs on the CPU.");
  if (!snapshot.cuda_reported)
    return QStringLiteral("No GPU: the engine did not report on CUDA.") + on_cpu;
  if (!snapshot.cuda_built)
    return QStringLiteral(
        "No GPU: this build of Tandem has no CUDA support, so it trains on the CPU only. "
        "Install a CUDA build of Tandem to use NVIDIA GPUs.");
  const QString reason = engine_gpu_reason(snapshot);
  if (reason.isEmpty())
    return QStringLiteral("No GPU: the engine found no CUDA GPU and gave no reason.") + on_cpu;
  QString headline;
  if (!snapshot.cuda_driver_version)
    headline = QStringLiteral("No GPU: no CUDA driver on this machine.");
  else if (reason.contains(QStringLiteral("insufficient"), Qt::CaseInsensitive))
    headline = QStringLiteral(
        "No GPU: the NVIDIA driver is too old for this build of Tandem; update it to train on "
        "the GPUs.");
  else if (reason.contains(QStringLiteral("no CUDA-capable device"), Qt::CaseInsensitive) ||
           reason.contains(QStringLiteral("no device"), Qt::CaseInsensitive))
    headline = QStringLiteral("No GPU: this machine has no CUDA GPU.");
  else
    headline = QStringLiteral("No GPU: CUDA cannot use this machine's GPUs.");
  return headline + QStringLiteral(" The engine reports: ") + as_sentence(reason) + on_cpu;
}

QStringList device_plan_choices(const DeviceSnapshot& snapshot) {
  QStringList plans{QStringLiteral("auto"), QStringLiteral("cpu")};
  const int cores = snapshot.cpu_cores.value_or(1);
  for (int n = 2; n < cores; n *= 2) plans << QStringLiteral("cpu:%1").arg(n);
  if (cores > 1) plans << QStringLiteral("cpu:%1").arg(cores);
  for (const GpuReading& gpu : snapshot.gpus) plans << gpu.device();
  if (snapshot.gpus.size() >= 2) plans << QStringLiteral("cuda:all");
  return plans;
}

QString format_gib(std::optional<qint64> bytes) {
  if (!bytes || *bytes < 0) return QStringLiteral("–");
  return QStringLiteral("%1 GiB").arg(static_cast<double>(*bytes) / (1024.0 * 1024.0 * 1024.0), 0,
                                      'f', 1);
}

}  // namespace tandem::gui
