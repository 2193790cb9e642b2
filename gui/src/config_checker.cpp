#include "config_checker.hpp"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QTemporaryFile>

namespace tandem::gui {

ConfigCheck parse_config_check(const QByteArray& output, int exit_code,
                               const QString& stderr_text) {
  ConfigCheck c;
  const QJsonDocument doc = QJsonDocument::fromJson(output.trimmed());
  if (!doc.isObject()) {
    c.error =
        QString("the engine could not check the config (exit code %1): %2")
            .arg(exit_code)
            .arg(stderr_text.trimmed().isEmpty() ? QString("no output") : stderr_text.trimmed());
    return c;
  }
  const QJsonObject o = doc.object();
  c.ok = o.value("ok").toBool();
  c.error = o.value("error").toString();
  c.path = o.value("path").toString();
  c.summary = o.value("summary").toObject();
  return c;
}

ConfigChecker::ConfigChecker(QObject* parent) : QObject(parent) {
  connect(&query_, &EngineQuery::answered, this, [this](const EngineAnswer& answer) {
    delete file_;
    file_ = nullptr;
    if (!answer.failure.isEmpty()) {
      Q_EMIT checked({false, answer.failure, {}, {}});
      return;
    }
    Q_EMIT checked(parse_config_check(answer.output, answer.exit_code, answer.error_output));
  });
}

ConfigChecker::~ConfigChecker() {
  delete file_;
}

void ConfigChecker::request(const QString& text, const QString& config_path, int delay_ms) {
  query_.request([this, text, config_path] { return command_for(text, config_path); }, delay_ms);
}

EngineQuery::Command ConfigChecker::command_for(const QString& text, const QString& config_path) {
  // The text goes to a hidden file beside the config, so relative paths mean what they will mean
  // at launch; the temporary folder when that folder is not writable.
  const QString folder =
      config_path.isEmpty() ? QDir::currentPath() : QFileInfo(config_path).absolutePath();
  delete file_;
  file_ = new QTemporaryFile(QDir(folder).filePath(".tandem-check-XXXXXX.json"));
  if (!file_->open()) {
    delete file_;
    file_ = new QTemporaryFile(QDir::temp().filePath("tandem-check-XXXXXX.json"));
    if (!file_->open()) return {{}, {}, "cannot write a temporary file to check the config"};
  }
  file_->write(text.toUtf8());
  file_->flush();
  return {{"check", file_->fileName(), "--json"}, {}, {}};
}

}  // namespace tandem::gui
