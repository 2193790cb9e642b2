#include "devices_panel.hpp"

#include <algorithm>
#include <cmath>

#include <QColor>
#include <QFont>
#include <QFontMetrics>
#include <QFrame>
#include <QGridLayout>
#include <QLabel>
#include <QPalette>
#include <QProgressBar>
#include <QScrollArea>
#include <QVBoxLayout>

#include "theme.hpp"

namespace tandem::gui {

namespace {

constexpr double kHotCelsius = 80.0;
const QColor kAmber(0xE6, 0x95, 0x00);
const QString kUnknown = QStringLiteral("unknown");

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
constexpr double kBytesPerGiB = kBytesPerMiB * 1024.0;

QString gib_number(qint64 bytes) {
  return QString::number(static_cast<double>(bytes) / kBytesPerGiB, 'f', 1);
}

int to_mib(qint64 bytes) {
  return static_cast<int>(std::min(static_cast<double>(bytes) / kBytesPerMiB, 2.0e9));
}

QLabel* make_title(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setTextFormat(Qt::RichText);
  label->setWordWrap(true);
  return label;
}

// "<b>cuda:0</b>  NVIDIA H100": the device in bold, then what it is (escaped: it is engine text).
QString title_html(const QString& device, const QString& detail) {
  return QStringLiteral("<b>%1</b>&nbsp;&nbsp;%2")
      .arg(device.toHtmlEscaped(), detail.toHtmlEscaped());
}

QProgressBar* make_bar(QWidget* parent, const QString& tooltip) {
  auto* bar = new QProgressBar(parent);
  bar->setRange(0, 100);
  bar->setValue(0);
  bar->setTextVisible(true);
  bar->setAlignment(Qt::AlignCenter);
  bar->setMinimumWidth(80);
  bar->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  bar->setFormat(kUnknown);
  bar->setToolTip(tooltip);
  return bar;
}

// A label column as wide as the widest caption, so that the bars of every section line up.
QGridLayout* make_grid(QWidget* parent) {
  auto* grid = new QGridLayout;
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setHorizontalSpacing(8);
  grid->setVerticalSpacing(4);
  grid->setColumnMinimumWidth(
      0, parent->fontMetrics().horizontalAdvance(QStringLiteral("Temperature")) + 4);
  grid->setColumnStretch(1, 1);
  return grid;
}

void add_grid_row(QGridLayout* grid, const QString& caption, QWidget* value) {
  const int row = grid->rowCount();
  auto* label = new QLabel(caption, value->parentWidget());
  label->setForegroundRole(QPalette::PlaceholderText);
  grid->addWidget(label, row, 0, Qt::AlignLeft | Qt::AlignVCenter);
  grid->addWidget(value, row, 1);
}

QFrame* make_separator(QWidget* parent) {
  auto* line = new QFrame(parent);
  line->setFrameShape(QFrame::HLine);
  line->setFrameShadow(QFrame::Sunken);
  return line;
}

void set_known(QProgressBar* bar, bool known) {
  bar->setEnabled(known);
}

void set_percent(QProgressBar* bar, std::optional<double> percent) {
  set_known(bar, percent.has_value());
  if (!percent) {
    bar->setValue(0);
    bar->setFormat(kUnknown);
    return;
  }
  const double clamped = std::clamp(*percent, 0.0, 100.0);
  bar->setValue(static_cast<int>(std::lround(clamped)));
  bar->setFormat(QStringLiteral("%1 %").arg(clamped, 0, 'f', 0));
}

// Range 0..total in MiB (an int holds 2 PiB of them); the text says "used / total GiB".
void set_memory(QProgressBar* bar, std::optional<qint64> used, std::optional<qint64> total) {
  const bool known = used && total && *total > 0;
  set_known(bar, known);
  if (!known) {
    bar->setRange(0, 100);
    bar->setValue(0);
    bar->setFormat(total && *total > 0 ? QStringLiteral("? / %1 GiB").arg(gib_number(*total))
                                       : kUnknown);
    return;
  }
  const int total_mib = std::max(1, to_mib(*total));
  bar->setRange(0, total_mib);
  bar->setValue(std::clamp(to_mib(*used), 0, total_mib));
  bar->setFormat(QStringLiteral("%1 / %2 GiB").arg(gib_number(*used), gib_number(*total)));
}

void set_hot(QProgressBar* bar, bool hot) {
  if (bar->property("hot").toBool() == hot) return;
  bar->setProperty("hot", hot);
  if (hot) {
    QPalette palette = bar->palette();
    palette.setColor(QPalette::Highlight, kAmber);
    bar->setPalette(palette);
  } else {
    bar->setPalette(QPalette());  // back to the inherited palette
  }
}

void set_temperature(QProgressBar* bar, std::optional<double> celsius) {
  set_known(bar, celsius.has_value());
  set_hot(bar, celsius && *celsius > kHotCelsius);
  if (!celsius) {
    bar->setValue(0);
    bar->setFormat(kUnknown);
    return;
  }
  bar->setValue(static_cast<int>(std::lround(std::clamp(*celsius, 0.0, 100.0))));
  bar->setFormat(QStringLiteral("%1 °C").arg(*celsius, 0, 'f', 0));
}

// What identifies a GPU row: a change here rebuilds the rows, anything else updates them.
GpuReading identity(const GpuReading& gpu) {
  GpuReading id;
  id.index = gpu.index;
  id.name = gpu.name;
  id.memory_total_bytes = gpu.memory_total_bytes;
  return id;
}

QLabel* make_note(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setWordWrap(true);
  label->setTextFormat(Qt::PlainText);
  label->setForegroundRole(QPalette::PlaceholderText);
  QFont font = label->font();
  if (font.pointSizeF() > 0) {
    font.setPointSizeF(font.pointSizeF() * 0.9);
    label->setFont(font);
  }
  label->hide();
  return label;
}

}  // namespace

DevicesPanel::DevicesPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  outer->addWidget(scroll);

  auto* content = new QWidget(scroll);
  auto* layout = new QVBoxLayout(content);
  layout->setContentsMargins(8, 8, 8, 8);
  layout->setSpacing(8);

  readings_ = new QWidget(content);
  auto* readings_layout = new QVBoxLayout(readings_);
  readings_layout->setContentsMargins(0, 0, 0, 0);
  readings_layout->setSpacing(8);

  cpu_title_ = make_title(readings_);
  cpu_title_->setText(title_html(QStringLiteral("CPU"), QStringLiteral("waiting for the engine…")));
  readings_layout->addWidget(cpu_title_);
  cpu_utilisation_ = make_bar(readings_, tr("CPU utilisation over the last second"));
  cpu_memory_ = make_bar(readings_, tr("Memory in use / installed (MemTotal - MemAvailable)"));
  QGridLayout* cpu_grid = make_grid(readings_);
  add_grid_row(cpu_grid, tr("Utilisation"), cpu_utilisation_);
  add_grid_row(cpu_grid, tr("Memory"), cpu_memory_);
  readings_layout->addLayout(cpu_grid);

  gpu_area_ = new QWidget(readings_);
  gpu_layout_ = new QVBoxLayout(gpu_area_);
  gpu_layout_->setContentsMargins(0, 0, 0, 0);
  gpu_layout_->setSpacing(8);
  gpu_area_->hide();
  readings_layout->addWidget(gpu_area_);
  layout->addWidget(readings_);

  nvml_note_ = make_note(content);
  layout->addWidget(nvml_note_);

  status_ = new QLabel(content);
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::PlainText);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setMargin(8);
  status_->hide();
  layout->addWidget(status_);

  updated_ = make_note(content);
  layout->addWidget(updated_);

  placement_ = new QWidget(content);
  auto* placement_layout = new QVBoxLayout(placement_);
  placement_layout->setContentsMargins(0, 0, 0, 0);
  placement_layout->addWidget(make_separator(placement_));
  auto* placement_title = make_title(placement_);
  placement_title->setText(title_html(tr("This run"), tr("what each device holds")));
  placement_layout->addWidget(placement_title);
  placement_list_ = new QLabel(placement_);
  placement_list_->setWordWrap(true);
  placement_list_->setTextFormat(Qt::PlainText);
  placement_list_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  placement_layout->addWidget(placement_list_);
  placement_->hide();
  layout->addWidget(placement_);
  layout->addStretch(1);

  scroll->setWidget(content);
}

void DevicesPanel::show_snapshot(const DeviceSnapshot& snapshot) {
  readings_->setEnabled(true);

  QString cpu_detail = snapshot.cpu_model.isEmpty() ? tr("unknown model") : snapshot.cpu_model;
  if (snapshot.cpu_cores)
    cpu_detail +=
        *snapshot.cpu_cores == 1 ? tr(" · 1 core") : tr(" · %1 cores").arg(*snapshot.cpu_cores);
  cpu_title_->setText(title_html(QStringLiteral("CPU"), cpu_detail));
  set_percent(cpu_utilisation_, snapshot.cpu_utilization_percent);
  set_memory(cpu_memory_, snapshot.memory_used_bytes, snapshot.memory_total_bytes);

  std::vector<GpuReading> gpu_set;
  gpu_set.reserve(snapshot.gpus.size());
  for (const GpuReading& gpu : snapshot.gpus) gpu_set.push_back(identity(gpu));
  if (gpu_set != gpu_set_) {
    rebuild_gpu_rows(snapshot.gpus);
    gpu_set_ = std::move(gpu_set);
  }
  for (std::size_t i = 0; i < gpu_rows_.size(); ++i) update_gpu_row(gpu_rows_[i], snapshot.gpus[i]);
  gpu_area_->setVisible(!gpu_rows_.empty());

  const bool nvml_note = !snapshot.gpus.empty() && !snapshot.nvml_status.isEmpty();
  nvml_note_->setText(nvml_note ? tr("No live GPU readings: %1").arg(snapshot.nvml_status)
                                : QString());
  nvml_note_->setVisible(nvml_note);

  set_status(no_gpu_reason(snapshot), false);

  const QDateTime time = snapshot.time.isValid() ? snapshot.time : QDateTime::currentDateTime();
  updated_->setText(tr("Updated %1").arg(time.toLocalTime().toString(QStringLiteral("HH:mm:ss"))));
  updated_->show();
}

void DevicesPanel::show_error(const QString& message) {
  readings_->setEnabled(false);
  set_status(message, true);
}

QString DevicesPanel::status_text() const {
  return status_->text();
}

void DevicesPanel::show_placement(const QStringList& lines) {
  const QString text = lines.join('\n');
  if (text == placement_list_->text() && placement_->isHidden() == lines.isEmpty()) return;
  placement_list_->setText(text);
  placement_->setVisible(!lines.isEmpty());
}

QString DevicesPanel::placement_text() const {
  return placement_->isHidden() ? QString() : placement_list_->text();
}

QString DevicesPanel::nvml_note_text() const {
  return nvml_note_->text();
}

void DevicesPanel::rebuild_gpu_rows(const std::vector<GpuReading>& gpus) {
  for (const GpuRow& row : gpu_rows_) delete row.container;
  gpu_rows_.clear();
  for (const GpuReading& gpu : gpus) {
    GpuRow row;
    row.container = new QWidget(gpu_area_);
    auto* layout = new QVBoxLayout(row.container);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(6);
    layout->addWidget(make_separator(row.container));
    row.title = make_title(row.container);
    row.title->setText(title_html(gpu.device(), gpu.name.isEmpty() ? tr("unnamed GPU") : gpu.name));
    layout->addWidget(row.title);
    row.utilisation = make_bar(row.container, tr("GPU utilisation (NVML)"));
    row.memory = make_bar(row.container, tr("GPU memory in use / on the card"));
    row.temperature = make_bar(row.container, tr("GPU temperature, 0-100 °C; amber above 80 °C"));
    row.temperature->setProperty("hot", false);
    row.power = new QLabel(kUnknown, row.container);
    row.power->setToolTip(tr("Power draw (NVML)"));
    QGridLayout* grid = make_grid(row.container);
    add_grid_row(grid, tr("Utilisation"), row.utilisation);
    add_grid_row(grid, tr("Memory"), row.memory);
    add_grid_row(grid, tr("Temperature"), row.temperature);
    add_grid_row(grid, tr("Power"), row.power);
    layout->addLayout(grid);
    gpu_layout_->addWidget(row.container);
    gpu_rows_.push_back(row);
  }
}

void DevicesPanel::update_gpu_row(const GpuRow& row, const GpuReading& gpu) {
  set_percent(row.utilisation, gpu.utilization_percent);
  set_memory(row.memory, gpu.memory_used_bytes, gpu.memory_total_bytes);
  set_temperature(row.temperature, gpu.temperature_c);
  row.power->setText(gpu.power_w ? QStringLiteral("%1 W").arg(*gpu.power_w, 0, 'f', 0) : kUnknown);
  row.power->setEnabled(gpu.power_w.has_value());
}

void DevicesPanel::set_status(const QString& text, bool is_error) {
  status_->setText(text);
  status_->setVisible(!text.isEmpty());
  if (text.isEmpty()) return;
  const SemanticColors colors = semantic_colors();
  const QString accent = (is_error ? colors.error : colors.accent).name();
  const QString sheet = QStringLiteral(
                            "QLabel { border: 1px solid palette(mid); border-left: 4px solid %1; "
                            "border-radius: 3px; background-color: palette(alternate-base); }")
                            .arg(accent);
  if (status_->styleSheet() != sheet) status_->setStyleSheet(sheet);  // re-polishing costs
}

const DevicesPanel::GpuRow* DevicesPanel::row_at(int row) const {
  if (row < 0 || row >= gpu_row_count()) return nullptr;
  return &gpu_rows_[static_cast<std::size_t>(row)];
}

QLabel* DevicesPanel::gpu_title_label(int row) const {
  const GpuRow* r = row_at(row);
  return r ? r->title : nullptr;
}

QProgressBar* DevicesPanel::gpu_utilisation_bar(int row) const {
  const GpuRow* r = row_at(row);
  return r ? r->utilisation : nullptr;
}

QProgressBar* DevicesPanel::gpu_memory_bar(int row) const {
  const GpuRow* r = row_at(row);
  return r ? r->memory : nullptr;
}

QProgressBar* DevicesPanel::gpu_temperature_bar(int row) const {
  const GpuRow* r = row_at(row);
  return r ? r->temperature : nullptr;
}

QLabel* DevicesPanel::gpu_power_label(int row) const {
  const GpuRow* r = row_at(row);
  return r ? r->power : nullptr;
}

}  // namespace tandem::gui
