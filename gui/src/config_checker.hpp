// Validates run-config text with the engine itself (`tandem check --json`), so the editor shows
// exactly the error `tandem train` would give, with its JSON path.
#pragma once

#include <QJsonObject>
#include <QObject>
#include <QString>

#include "engine_query.hpp"

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
/// dropped (EngineQuery). Lives on the GUI thread.
class ConfigChecker : public QObject {
  Q_OBJECT
 public:
  explicit ConfigChecker(QObject* parent = nullptr);
  ~ConfigChecker() override;

  /// Checks `text` as if it were the file at `config_path` (relative data paths resolve against
  /// its folder; empty: the working directory) once no new request came for `delay_ms`.
  void request(const QString& text, const QString& config_path, int delay_ms = 600);
  bool busy() const { return query_.busy(); }

 Q_SIGNALS:
  void checked(const tandem::gui::ConfigCheck& result);

 private:
  // Writes `text` to a hidden file beside `config_path` (or in the temporary folder when that
  // folder is not writable) and returns the command that checks it.
  EngineQuery::Command command_for(const QString& text, const QString& config_path);

  EngineQuery query_;
  QTemporaryFile* file_ = nullptr;  // the text being checked, until its answer
};

}  // namespace tandem::gui
