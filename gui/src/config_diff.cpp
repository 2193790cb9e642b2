#include "config_diff.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <algorithm>

namespace tandem::gui {

namespace {

void flatten_into(const QJsonValue& value, const QString& path, QMap<QString, QJsonValue>& out) {
  if (value.isObject() && !value.toObject().isEmpty()) {
    const QJsonObject o = value.toObject();
    for (auto it = o.begin(); it != o.end(); ++it)
      flatten_into(it.value(), path.isEmpty() ? it.key() : path + "." + it.key(), out);
  } else if (value.isArray() && !value.toArray().isEmpty()) {
    const QJsonArray a = value.toArray();
    for (qsizetype i = 0; i < a.size(); ++i)
      flatten_into(a[i], QString("%1[%2]").arg(path).arg(i), out);
  } else {
    out.insert(path, value);
  }
}

bool under(const QString& path, const QString& root) {
  return path == root || path.startsWith(root + ".") || path.startsWith(root + "[");
}

}  // namespace

QMap<QString, QJsonValue> flatten_config(const QJsonObject& config) {
  QMap<QString, QJsonValue> out;
  flatten_into(config, QString(), out);
  return out;
}

QStringList differing_paths(const QList<QMap<QString, QJsonValue>>& flat_configs,
                            const QStringList& ignored) {
  if (flat_configs.isEmpty()) return {};
  QMap<QString, bool> all;  // every path any config has, in order
  for (const auto& flat : flat_configs)
    for (auto it = flat.begin(); it != flat.end(); ++it) all.insert(it.key(), true);
  QStringList out;
  for (auto it = all.begin(); it != all.end(); ++it) {
    const QString& path = it.key();
    if (std::any_of(ignored.begin(), ignored.end(),
                    [&](const QString& root) { return under(path, root); }))
      continue;
    const auto first = flat_configs.front().find(path);
    for (const auto& flat : flat_configs) {
      const auto here = flat.find(path);
      const bool same = (here == flat.end()) == (first == flat_configs.front().end()) &&
                        (here == flat.end() || *here == *first);
      if (!same) {
        out << path;
        break;
      }
    }
  }
  return out;
}

QString config_value_text(const QJsonValue& value) {
  switch (value.type()) {
    case QJsonValue::Undefined:
      return QString::fromUtf8("—");
    case QJsonValue::String:
      return value.toString();
    case QJsonValue::Null:
      return "null";
    case QJsonValue::Bool:
      return value.toBool() ? "true" : "false";
    case QJsonValue::Double:
      return QString::number(value.toDouble(), 'g', 10);
    case QJsonValue::Object:
      return "{}";
    case QJsonValue::Array:
      return "[]";
  }
  return {};
}

}  // namespace tandem::gui
