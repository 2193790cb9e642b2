// What differs between the run configs of several runs: each config flattened to dotted paths
// ("optimizer.config.learning_rate", "callbacks[1].options.patience"), and the paths whose values
// are not the same in all of them. The hyperparameter table of a run comparison shows these.
#pragma once

#include <QJsonObject>
#include <QJsonValue>
#include <QList>
#include <QMap>
#include <QString>
#include <QStringList>

namespace tandem::gui {

/// Every leaf value (number, string, bool, null; empty objects and arrays too) of `config` under
/// its path: keys joined with '.', array elements as "[i]". Paths sort as QMap sorts them.
QMap<QString, QJsonValue> flatten_config(const QJsonObject& config);

/// The paths whose value is not the same in every config (missing from some counts as
/// different), in path order. `ignored` paths (and everything under them) are left out.
QStringList differing_paths(const QList<QMap<QString, QJsonValue>>& flat_configs,
                            const QStringList& ignored = {});

/// A leaf value as one table cell shows it: numbers as JSON writes them, strings bare, "—" for
/// a missing value.
QString config_value_text(const QJsonValue& value);

}  // namespace tandem::gui
