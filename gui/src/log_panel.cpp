#include "log_panel.hpp"

#include <QFontDatabase>
#include <QLabel>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QVBoxLayout>

#include "theme.hpp"

namespace tandem::gui {

LogPanel::LogPanel(QWidget* parent)
    : QWidget(parent), banner_(new QLabel), log_(new QPlainTextEdit) {
  banner_->setWordWrap(true);
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->hide();
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(kMaxLines);
  log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  log_->setLineWrapMode(QPlainTextEdit::NoWrap);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(banner_);
  layout->addWidget(log_, 1);
}

QString LogPanel::text() const {
  return log_->toPlainText();
}

QString LogPanel::failure() const {
  return banner_->isHidden() ? QString() : banner_->text();
}

void LogPanel::append_line(const QString& line) {
  QScrollBar* bar = log_->verticalScrollBar();
  const bool at_end = bar->value() == bar->maximum();
  if (line.contains("error", Qt::CaseInsensitive) || line.startsWith("tandem-gui:")) {
    const SemanticColors colors = semantic_colors();
    const QString color = (line.startsWith("tandem-gui:") ? colors.accent : colors.error).name();
    log_->appendHtml(
        QString("<span style=\"color:%1\">%2</span>").arg(color, line.toHtmlEscaped()));
  } else {
    log_->appendPlainText(line);
  }
  if (at_end) bar->setValue(bar->maximum());
}

void LogPanel::show_failure(const QString& message) {
  banner_->setStyleSheet(banner_style(true));  // in the shades of the theme in use now
  banner_->setText(message);
  banner_->setVisible(!message.isEmpty());
}

void LogPanel::clear() {
  log_->clear();
  show_failure({});
}

}  // namespace tandem::gui
