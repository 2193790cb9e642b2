// The callback plugins the engine can load, with their option schemas (`tandem plugins --json`).
#pragma once

#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QProcess>
#include <QString>

namespace tandem::gui {

struct PluginInfo {
  QString name;
  QString description;
  QString version;
  QString path;
  bool ok = false;
  QString error;  // why a broken plugin cannot load
  QJsonObject options_schema;
};

/// Parses `tandem plugins --json` output. Returns false (and sets *error) when it is not that.
bool parse_plugin_catalog(const QByteArray& json, QList<PluginInfo>* plugins, QString* error);

/// Runs the engine once (asynchronously) and keeps the list. Lives on the GUI thread.
class PluginCatalog : public QObject {
  Q_OBJECT
 public:
  explicit PluginCatalog(QObject* parent = nullptr);
  /// Ends a listing still running.
  ~PluginCatalog() override;

  /// Starts `tandem plugins --json`; loaded() or failed() follows.
  void load();
  const QList<PluginInfo>& plugins() const { return plugins_; }
  /// The plugin of this name, or null.
  const PluginInfo* find(const QString& name) const;
  bool is_loaded() const { return loaded_; }

 Q_SIGNALS:
  void loaded();
  void failed(const QString& message);

 private:
  QProcess process_;
  QList<PluginInfo> plugins_;
  bool loaded_ = false;
};

}  // namespace tandem::gui
