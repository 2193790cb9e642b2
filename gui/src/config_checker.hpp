// Validates run-config text with the engine itself (`tandem check --json`), so the editor shows
// exactly the error `tandem train` would give, with its JSON path.
#pragma once

#include <QJsonObject>
#include <QObject>
#include <QPointer>
#include <QProcess>
#include <QString>
#include <QTimer>

class QTemporaryFile;

namespace tandem::gui {

struct ConfigCheck {
  bool ok = false;
  QString error;        // the engine's message when not ok
  QString path;         // the JSON path of the error, when it has one
  QJsonObject summary;  // when ok: name, parameters, devices, batch_size, samples, plugins
};

/// Parses `tandem check --json` output.
ConfigCheck parse_config_check(const QByteArray& output, int exit_code, const QString& stderr_text);

/// Checks the newest text given to request() after a short quiet period; older results are
/// dropped. Lives on the GUI thread.
class ConfigChecker : public QObject {
  Q_OBJECT
 public:
  explicit ConfigChecker(QObject* parent = nullptr);
  ~ConfigChecker() override;

  /// Checks `text` as if it were the file at `config_path` (relative data paths resolve against
  /// its folder; empty: the working directory) once no new request came for `delay_ms`.
  void request(const QString& text, const QString& config_path, int delay_ms = 600);
  bool busy() const;

 Q_SIGNALS:
  void checked(const tandem::gui::ConfigCheck& result);

 private:
  void start_check();

  QTimer debounce_;
  QString text_, config_path_;
  QPointer<QProcess> process_;
  QTemporaryFile* file_ = nullptr;
  bool pending_ = false;
};

}  // namespace tandem::gui
