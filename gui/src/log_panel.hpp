// The Log panel: the engine's stderr, with a banner that states a failed run's error.
#pragma once

#include <QWidget>

class QLabel;
class QPlainTextEdit;

namespace tandem::gui {

class LogPanel : public QWidget {
  Q_OBJECT
 public:
  explicit LogPanel(QWidget* parent = nullptr);

  /// Keeps the last `kMaxLines` lines; lines mentioning an error are shown in red.
  static constexpr int kMaxLines = 20000;
  QString text() const;
  QString failure() const;

 public Q_SLOTS:
  void append_line(const QString& line);
  /// Shows a red banner above the log (empty text hides it).
  void show_failure(const QString& message);
  void clear();

 private:
  QLabel* banner_;
  QPlainTextEdit* log_;
};

}  // namespace tandem::gui
