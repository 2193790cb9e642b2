#include "config_checker.hpp"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QTemporaryFile>

#include "engine_locator.hpp"

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
  debounce_.setSingleShot(true);
  connect(&debounce_, &QTimer::timeout, this, &ConfigChecker::start_check);
}

ConfigChecker::~ConfigChecker() {
  if (process_) {
    process_->disconnect();
    process_->kill();
    process_->waitForFinished(1000);
  }
  delete file_;
}

bool ConfigChecker::busy() const {
  return debounce_.isActive() || process_ || pending_;
}

void ConfigChecker::request(const QString& text, const QString& config_path, int delay_ms) {
  text_ = text;
  config_path_ = config_path;
  pending_ = true;
  debounce_.start(delay_ms);
}

void ConfigChecker::start_check() {
  if (process_) return;  // the running check's end starts the next one
  pending_ = false;
  const QString engine = engine_path();
  if (engine.isEmpty()) {
    Q_EMIT checked({false, engine_missing_message(), {}, {}});
    return;
  }
  // The text goes to a hidden file beside the config, so relative paths mean what they will mean
  // at launch; the temporary folder when that folder is not writable.
  const QString folder =
      config_path_.isEmpty() ? QDir::currentPath() : QFileInfo(config_path_).absolutePath();
  delete file_;
  file_ = new QTemporaryFile(QDir(folder).filePath(".tandem-check-XXXXXX.json"));
  if (!file_->open()) {
    delete file_;
    file_ = new QTemporaryFile(QDir::temp().filePath("tandem-check-XXXXXX.json"));
    if (!file_->open()) {
      Q_EMIT checked({false, "cannot write a temporary file to check the config", {}, {}});
      return;
    }
  }
  file_->write(text_.toUtf8());
  file_->flush();
  auto* process = new QProcess(this);
  process_ = process;
  connect(process, &QProcess::finished, this, [this, process](int code, QProcess::ExitStatus) {
    ConfigCheck result = parse_config_check(process->readAllStandardOutput(), code,
                                            QString::fromUtf8(process->readAllStandardError()));
    process->deleteLater();
    process_ = nullptr;
    delete file_;
    file_ = nullptr;
    if (pending_ && !debounce_.isActive()) {
      start_check();  // the text changed while checking: its result is stale
      return;
    }
    if (!pending_) Q_EMIT checked(result);
  });
  connect(process, &QProcess::errorOccurred, this, [this, process](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    const QString message = "cannot run the engine: " + process->errorString();
    process->deleteLater();
    process_ = nullptr;
    Q_EMIT checked({false, message, {}, {}});
  });
  process->start(engine, {"check", file_->fileName(), "--json"});
}

}  // namespace tandem::gui
