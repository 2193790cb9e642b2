// The hyperparameter table of a comparison: the config values that differ (flattened paths,
// worked by hand), final metrics, numeric sorting, and the column filter.
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLineEdit>
#include <QTableWidget>
#include <QtTest>

#include "config_diff.hpp"
#include "run_comparison_table.hpp"

using namespace tandem::gui;

namespace {

QJsonObject json(const char* text) {
  return QJsonDocument::fromJson(text).object();
}

ComparedRun run(const QString& label, const char* config, const char* logs) {
  return {label, Qt::red, json(config), json(logs), "finished", 3, 3};
}

QStringList column(const QTableWidget* table, int c) {
  QStringList out;
  for (int row = 0; row < table->rowCount(); ++row) out << table->item(row, c)->text();
  return out;
}

}  // namespace

class RunComparisonTableTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void configs_flatten_to_paths() {
    const auto flat = flatten_config(json(R"({"epochs": 3, "optimizer": {"class_name": "Adam",
        "config": {"learning_rate": 0.001}}, "callbacks": [{"plugin": "checkpoint"},
        {"plugin": "early_stopping", "options": {"patience": 2}}], "tags": [], "x": {}})"));
    QCOMPARE(flat.keys(), QStringList({"callbacks[0].plugin", "callbacks[1].options.patience",
                                       "callbacks[1].plugin", "epochs", "optimizer.class_name",
                                       "optimizer.config.learning_rate", "tags", "x"}));
    QCOMPARE(flat.value("callbacks[1].options.patience").toInt(), 2);
    QCOMPARE(config_value_text(flat.value("optimizer.config.learning_rate")), QString("0.001"));
    QCOMPARE(config_value_text(QJsonValue(QJsonValue::Undefined)), QString::fromUtf8("—"));
  }

  void only_the_values_that_differ_are_kept() {
    const QList<QMap<QString, QJsonValue>> flat = {
        flatten_config(json(R"({"name": "a", "epochs": 3, "batch_size": 32, "seed": 1})")),
        flatten_config(json(R"({"name": "b", "epochs": 3, "batch_size": 64, "seed": 1,
                               "shuffle": false})")),
        flatten_config(json(R"({"name": "c", "epochs": 3, "batch_size": 32, "seed": 1})"))};
    // batch_size differs; shuffle is missing from two; name is the run's own and left out.
    QCOMPARE(differing_paths(flat, {"name"}), QStringList({"batch_size", "shuffle"}));
    QCOMPARE(differing_paths(flat), QStringList({"batch_size", "name", "shuffle"}));
    QCOMPARE(differing_paths({flat[0], flat[0]}), QStringList());
    QCOMPARE(differing_paths({}), QStringList());
  }

  void the_table_shows_differences_and_final_metrics_sorted_and_filtered() {
    RunComparisonTable view;
    view.set_runs({
        run("small-lr", R"({"name": "m", "optimizer": {"config": {"learning_rate": 0.0001}},
                            "batch_size": 32})",
            R"({"loss": 0.9, "val_loss": 1.0, "accuracy": 0.7, "val_accuracy": 0.65})"),
        run("big-lr", R"({"name": "m", "optimizer": {"config": {"learning_rate": 0.01}},
                          "batch_size": 32})",
            R"({"loss": 0.4, "val_loss": 0.5, "accuracy": 0.85, "val_accuracy": 0.8})"),
        run("mid-lr", R"({"name": "m", "optimizer": {"config": {"learning_rate": 0.001}},
                          "batch_size": 32})",
            R"({"loss": 0.6, "val_loss": 0.7, "accuracy": 0.8, "val_accuracy": 0.75})"),
    });
    QCOMPARE(view.differing(), QStringList({"optimizer.config.learning_rate"}));
    QCOMPARE(view.columns(),
             QStringList({"run", "status", "epochs done", "optimizer.config.learning_rate", "loss",
                          "val_loss", "accuracy", "val_accuracy"}));
    QTableWidget* table = view.table();
    QCOMPARE(table->rowCount(), 3);
    // Sorting by the learning rate sorts numbers as numbers (0.0001 < 0.001 < 0.01).
    table->sortItems(3, Qt::AscendingOrder);
    QCOMPARE(column(table, 0), QStringList({"small-lr", "mid-lr", "big-lr"}));
    table->sortItems(5, Qt::AscendingOrder);  // val_loss
    QCOMPARE(column(table, 0), QStringList({"big-lr", "mid-lr", "small-lr"}));
    QCOMPARE(table->item(0, 5)->data(Qt::DisplayRole).toDouble(), 0.5);
    // The sort survives new data (a live run's table is rebuilt as epochs end).
    view.set_runs({run("a", "{}", R"({"val_loss": 2})"), run("b", "{}", R"({"val_loss": 1})")});
    QCOMPARE(column(table, 0), QStringList({"b", "a"}));

    // The filter keeps matching columns (and the run's own).
    view.set_runs({run("x", R"({"lr": 1, "batch_size": 8})", R"({"val_loss": 2})"),
                   run("y", R"({"lr": 2, "batch_size": 16})", R"({"val_loss": 1})")});
    view.filter_edit()->setText("VAL_");
    QCOMPARE(view.visible_columns(), QStringList({"run", "val_loss"}));
    view.set_filter("batch");
    QCOMPARE(view.filter_edit()->text(), QString("batch"));
    QCOMPARE(view.visible_columns(), QStringList({"run", "batch_size"}));
    view.set_filter("");
    QCOMPARE(view.visible_columns().size(), view.columns().size());
  }
};

QTEST_MAIN(RunComparisonTableTest)
#include "run_comparison_table_test.moc"
