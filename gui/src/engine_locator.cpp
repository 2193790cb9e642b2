#include "engine_locator.hpp"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

namespace tandem::gui {

namespace {

bool executable(const QString& path) {
  const QFileInfo info(path);
  return info.isFile() && info.isExecutable();
}

}  // namespace

QString engine_path() {
  const QString from_env = qEnvironmentVariable("TANDEM_ENGINE");
  if (!from_env.isEmpty())
    return executable(from_env) ? QFileInfo(from_env).absoluteFilePath() : "";
  const QDir app_dir(QCoreApplication::applicationDirPath());
  for (const QString& candidate : {app_dir.filePath("tandem"), app_dir.filePath("../core/tandem")})
    if (executable(candidate)) return QFileInfo(candidate).canonicalFilePath();
  return QStandardPaths::findExecutable("tandem");
}

QString engine_missing_message() {
  const QString from_env = qEnvironmentVariable("TANDEM_ENGINE");
  if (!from_env.isEmpty())
    return QString("TANDEM_ENGINE is %1, which is not an executable file").arg(from_env);
  return QString(
             "the tandem engine was not found next to %1, in ../core/ (build tree) or on PATH; "
             "set TANDEM_ENGINE to its path")
      .arg(QCoreApplication::applicationDirPath());
}

}  // namespace tandem::gui
