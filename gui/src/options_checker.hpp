// Checks callback options against their plugin's schema with the engine itself
// (`tandem check-options --json`), so an option form says exactly what `tandem train` would: the
// dashboard keeps no JSON Schema validator of its own.
#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QString>

#include "engine_query.hpp"

namespace tandem::gui {

struct OptionProblem {
  QString option;   // the property ("" for the options as a whole)
  QString path;     // below the options: "patience", "sizes[1]"
  QString message;  // without the path: "expected an integer >= 0, got -1"
  /// "path: message", as forms and the status line show it.
  QString text() const { return path.isEmpty() ? message : path + QStringLiteral(": ") + message; }
};

struct OptionsCheck {
  QJsonObject schema, options;  // what was checked
  bool ok = false;              // the engine accepted the options
  QString error;                // set when the engine could not check them at all
  QList<OptionProblem> problems;
  QJsonObject expects;  // option -> what it accepts, in the engine's words ("an integer >= 0")
};

/// Parses `tandem check-options --json` output (the request's schema and options are not filled).
OptionsCheck parse_options_check(const QByteArray& output, int exit_code,
                                 const QString& stderr_text);

/// Checks the newest schema and options given to request() after a short quiet period; older
/// results are dropped (EngineQuery), so checked() always answers the latest request. Lives on
/// the GUI thread; one engine process at a time.
class OptionsChecker : public QObject {
  Q_OBJECT
 public:
  explicit OptionsChecker(QObject* parent = nullptr);

  void request(const QJsonObject& schema, const QJsonObject& options, int delay_ms = 100);
  /// A request is waiting or being checked.
  bool busy() const { return query_.busy(); }

 Q_SIGNALS:
  void checked(const tandem::gui::OptionsCheck& result);

 private:
  EngineQuery query_;
  QJsonObject schema_, options_;  // the latest request's, which an answer answers
};

}  // namespace tandem::gui
