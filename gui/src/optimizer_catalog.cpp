#include "optimizer_catalog.hpp"

#include <QJsonArray>
#include <QJsonDocument>

#include "engine_locator.hpp"

namespace tandem::gui {

bool parse_optimizer_catalog(const QByteArray& json, QList<OptimizerInfo>* optimizers,
                             QString* error) {
  QJsonParseError parse_error;
  const QJsonDocument doc = QJsonDocument::fromJson(json, &parse_error);
  if (parse_error.error != QJsonParseError::NoError || !doc.isObject() ||
      !doc.object().value("optimizers").isArray()) {
    *error = "the engine's optimizer list is not the expected JSON (" +
             (parse_error.error != QJsonParseError::NoError ? parse_error.errorString()
                                                            : QString("no \"optimizers\" list")) +
             ")";
    return false;
  }
  QList<OptimizerInfo> list;
  for (const QJsonValue& v : doc.object().value("optimizers").toArray()) {
    const QJsonObject o = v.toObject();
    OptimizerInfo info;
    info.class_name = o.value("class_name").toString();
    if (info.class_name.isEmpty()) continue;
    for (const QJsonValue& alias : o.value("aliases").toArray()) info.aliases << alias.toString();
    info.config = o.value("config").toObject();
    list.push_back(info);
  }
  if (list.isEmpty()) {
    *error = "the engine lists no optimizer";
    return false;
  }
  *optimizers = list;
  return true;
}

OptimizerCatalog::OptimizerCatalog(QObject* parent) : QObject(parent) {
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    if (status != QProcess::NormalExit || code != 0) {
      const QString stderr_text = QString::fromUtf8(process_.readAllStandardError()).trimmed();
      fail(QString("`tandem optimizers --json` failed (exit code %1): %2")
               .arg(code)
               .arg(stderr_text.isEmpty() ? QString("no message") : stderr_text));
      return;
    }
    QString error;
    if (!parse_optimizer_catalog(process_.readAllStandardOutput(), &optimizers_, &error)) {
      fail(error);
      return;
    }
    loaded_ = true;
    error_.clear();
    Q_EMIT loaded();
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) fail("cannot run the engine: " + process_.errorString());
  });
}

OptimizerCatalog::~OptimizerCatalog() {
  if (process_.state() == QProcess::NotRunning) return;
  process_.disconnect();
  process_.kill();
  process_.waitForFinished(2000);
}

void OptimizerCatalog::fail(const QString& message) {
  error_ = message;
  Q_EMIT failed(message);
}

void OptimizerCatalog::load() {
  const QString engine = engine_path();
  if (engine.isEmpty()) {
    fail(engine_missing_message());
    return;
  }
  if (process_.state() != QProcess::NotRunning) return;
  process_.start(engine, {"optimizers", "--json"});
}

QString OptimizerCatalog::class_of(const QString& name) const {
  for (const OptimizerInfo& info : optimizers_) {
    if (info.class_name.compare(name, Qt::CaseInsensitive) == 0) return info.class_name;
    for (const QString& alias : info.aliases)
      if (alias.compare(name, Qt::CaseInsensitive) == 0) return info.class_name;
  }
  return {};
}

}  // namespace tandem::gui
