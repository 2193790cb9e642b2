#include "options_checker.hpp"

#include <QJsonArray>
#include <QJsonDocument>

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
  connect(&query_, &EngineQuery::answered, this, [this](const EngineAnswer& answer) {
    OptionsCheck result;
    if (answer.failure.isEmpty())
      result = parse_options_check(answer.output, answer.exit_code, answer.error_output);
    else
      result.error = answer.failure;
    result.schema = schema_;
    result.options = options_;
    Q_EMIT checked(result);
  });
}

void OptionsChecker::request(const QJsonObject& schema, const QJsonObject& options, int delay_ms) {
  schema_ = schema;
  options_ = options;
  const QByteArray input = QJsonDocument(QJsonObject{{"schema", schema}, {"options", options}})
                               .toJson(QJsonDocument::Compact);
  query_.request(
      [input] {
        return EngineQuery::Command{{"check-options", "-", "--json"}, input, {}};
      },
      delay_ms);
}

}  // namespace tandem::gui
