#include "plugin_catalog.hpp"

#include <QJsonArray>
#include <QJsonDocument>

#include "engine_locator.hpp"

namespace tandem::gui {

bool parse_plugin_catalog(const QByteArray& json, QList<PluginInfo>* plugins, QString* error) {
  QJsonParseError parse_error;
  const QJsonDocument doc = QJsonDocument::fromJson(json, &parse_error);
  if (parse_error.error != QJsonParseError::NoError || !doc.isObject() ||
      !doc.object().value("plugins").isArray()) {
    *error = "the engine's plugin list is not the expected JSON (" +
             (parse_error.error != QJsonParseError::NoError ? parse_error.errorString()
                                                            : QString("no \"plugins\" list")) +
             ")";
    return false;
  }
  plugins->clear();
  for (const QJsonValue& v : doc.object().value("plugins").toArray()) {
    const QJsonObject o = v.toObject();
    PluginInfo p;
    p.name = o.value("name").toString();
    if (p.name.isEmpty()) continue;
    p.description = o.value("description").toString();
    p.version = o.value("version").toString();
    p.path = o.value("path").toString();
    p.ok = o.value("ok").toBool();
    p.error = o.value("error").toString();
    p.options_schema = o.value("options_schema").toObject();
    plugins->push_back(p);
  }
  return true;
}

PluginCatalog::PluginCatalog(QObject* parent) : QObject(parent) {
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    QString error;
    if (status != QProcess::NormalExit || code != 0) {
      Q_EMIT failed(QString("`tandem plugins --json` failed (exit code %1): %2")
                        .arg(code)
                        .arg(QString::fromUtf8(process_.readAllStandardError()).trimmed()));
      return;
    }
    if (!parse_plugin_catalog(process_.readAllStandardOutput(), &plugins_, &error)) {
      Q_EMIT failed(error);
      return;
    }
    loaded_ = true;
    Q_EMIT loaded();
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart)
      Q_EMIT failed("cannot run the engine: " + process_.errorString());
  });
}

PluginCatalog::~PluginCatalog() {
  if (process_.state() == QProcess::NotRunning) return;
  process_.disconnect();
  process_.kill();
  process_.waitForFinished(2000);
}

void PluginCatalog::load() {
  const QString engine = engine_path();
  if (engine.isEmpty()) {
    Q_EMIT failed(engine_missing_message());
    return;
  }
  if (process_.state() != QProcess::NotRunning) return;
  process_.start(engine, {"plugins", "--json"});
}

const PluginInfo* PluginCatalog::find(const QString& name) const {
  for (const PluginInfo& p : plugins_)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace tandem::gui
