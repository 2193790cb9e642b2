// The optimizers a run config can name, as the engine lists them (`tandem optimizers --json`):
// the Launch panel offers these rather than a list of its own.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace tandem::gui {

struct OptimizerInfo {
  QString class_name;   // "Adam"
  QStringList aliases;  // other spellings the engine accepts: "adam"
  QJsonObject config;   // its Keras config at the defaults
};

/// Parses `tandem optimizers --json` output. Returns false (and sets *error) when it is not that.
bool parse_optimizer_catalog(const QByteArray& json, QList<OptimizerInfo>* optimizers,
                             QString* error);

/// Runs the engine once (asynchronously) and keeps the list. Lives on the GUI thread.
class OptimizerCatalog : public QObject {
  Q_OBJECT
 public:
  explicit OptimizerCatalog(QObject* parent = nullptr);
  /// Ends a listing still running.
  ~OptimizerCatalog() override;

  /// Starts `tandem optimizers --json`; loaded() or failed() follows.
  void load();
  const QList<OptimizerInfo>& optimizers() const { return optimizers_; }
  /// The class name of `name` ("adam", "Adam" -> "Adam"; case-insensitive, aliases too), or ""
  /// when the engine does not list it.
  QString class_of(const QString& name) const;
  bool is_loaded() const { return loaded_; }
  /// Why the last load() failed ("" when it did not).
  QString error() const { return error_; }

 Q_SIGNALS:
  void loaded();
  void failed(const QString& message);

 private:
  void fail(const QString& message);

  QProcess process_;
  QList<OptimizerInfo> optimizers_;
  bool loaded_ = false;
  QString error_;
};

}  // namespace tandem::gui
