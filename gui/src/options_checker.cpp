#include "options_checker.hpp"

#include <QJsonArray>
#include <QJsonDocument>

#include "engine_locator.hpp"

namespace tandem::gui {

OptionsCheck parse_options_check(const QByteArray& output, int exit_code,
                                 const QString& stderr_text) {
  OptionsCheck c;
  const QJsonDocument doc = QJsonDocument::fromJson(output.trimmed());
  if (!doc.isObject()) {
    c.error =
        QString("the engine could not check the options (exit code %1): %2")
            .arg(exit_code)
            .arg(stderr_text.trimmed().isEmpty() ? QString("no output") : stderr_text.trimmed());
    return c;
  }
  const QJsonObject o = doc.object();
  c.ok = o.value("ok").toBool();
  c.error = o.value("error").toString();
  for (const QJsonValue& v : o.value("problems").toArray()) {
    const QJsonObject p = v.toObject();
    c.problems.push_back(
        {p.value("option").toString(), p.value("path").toString(), p.value("message").toString()});
  }
  c.expects = o.value("expects").toObject();
  if (!c.ok && c.error.isEmpty() && c.problems.isEmpty())
    c.error =
        QString("the engine refused the options without saying why (exit code %1)").arg(exit_code);
  return c;
}

OptionsChecker::OptionsChecker(QObject* parent) : QObject(parent) {
  debounce_.setSingleShot(true);
  connect(&debounce_, &QTimer::timeout, this, &OptionsChecker::start_check);
}

OptionsChecker::~OptionsChecker() {
  if (process_) {
    process_->disconnect();
    process_->kill();
    process_->waitForFinished(1000);
  }
}

bool OptionsChecker::busy() const {
  return debounce_.isActive() || process_ || pending_;
}

void OptionsChecker::request(const QJsonObject& schema, const QJsonObject& options, int delay_ms) {
  schema_ = schema;
  options_ = options;
  pending_ = true;
  debounce_.start(delay_ms);
}

void OptionsChecker::start_check() {
  if (process_) return;  // the running check's end starts the next one
  pending_ = false;
  const QJsonObject schema = schema_, options = options_;
  const QString engine = engine_path();
  if (engine.isEmpty()) {
    OptionsCheck result;
    result.schema = schema;
    result.options = options;
    result.error = engine_missing_message();
    Q_EMIT checked(result);
    return;
  }
  auto* process = new QProcess(this);
  process_ = process;
  connect(process, &QProcess::finished, this,
          [this, process, schema, options](int code, QProcess::ExitStatus) {
            OptionsCheck result =
                parse_options_check(process->readAllStandardOutput(), code,
                                    QString::fromUtf8(process->readAllStandardError()));
            result.schema = schema;
            result.options = options;
            process->deleteLater();
            process_ = nullptr;
            if (pending_) {
              // A newer request came while checking: this answer is stale.
              if (!debounce_.isActive()) start_check();
              return;
            }
            Q_EMIT checked(result);
          });
  connect(process, &QProcess::errorOccurred, this,
          [this, process, schema, options](QProcess::ProcessError e) {
            if (e != QProcess::FailedToStart) return;
            OptionsCheck result;
            result.schema = schema;
            result.options = options;
            result.error = "cannot run the engine: " + process->errorString();
            process->deleteLater();
            process_ = nullptr;
            if (pending_) {
              if (!debounce_.isActive()) start_check();
              return;
            }
            Q_EMIT checked(result);
          });
  process->start(engine, {"check-options", "-", "--json"});
  process->write(QJsonDocument(QJsonObject{{"schema", schema}, {"options", options}})
                     .toJson(QJsonDocument::Compact));
  process->closeWriteChannel();
}

}  // namespace tandem::gui
