#include "schema_form.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <QCheckBox>
#include <QComboBox>
#include <QFont>
#include <QFormLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonParseError>
#include <QLabel>
#include <QLineEdit>
#include <QPalette>
#include <QVBoxLayout>
#include <QVariant>

#include "theme.hpp"

namespace tandem::gui {

namespace {

QString problem_color() {
  return semantic_colors().error.name();
}

// ---- JSON helpers --------------------------------------------------------------------------

/// Compact JSON text of any value ("abc" with its quotes, 5, 0.25, null, [1,2]).
QString json_text(const QJsonValue& value) {
  if (value.isObject())
    return QString::fromUtf8(QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact));
  if (value.isArray())
    return QString::fromUtf8(QJsonDocument(value.toArray()).toJson(QJsonDocument::Compact));
  const QByteArray wrapped = QJsonDocument(QJsonArray{value.isUndefined() ? QJsonValue() : value})
                                 .toJson(QJsonDocument::Compact);
  return QString::fromUtf8(wrapped.mid(1, wrapped.size() - 2));
}

/// Same JSON value; integers and doubles compare by value (5 == 5.0), as in the engine.
bool same_json(const QJsonValue& a, const QJsonValue& b) {
  return json_text(a) == json_text(b);
}

/// Any JSON value written as text (scalars included, which QJsonDocument alone refuses).
std::optional<QJsonValue> parse_json(const QString& text) {
  QJsonParseError error;
  const QJsonDocument document =
      QJsonDocument::fromJson(QStringLiteral("[%1]").arg(text).toUtf8(), &error);
  if (error.error != QJsonParseError::NoError || !document.isArray() ||
      document.array().size() != 1)
    return std::nullopt;
  return document.array().at(0);
}

std::optional<double> parse_number(const QString& text) {
  bool ok = false;
  const double number = text.toDouble(&ok);  // C locale: "0.5", "1e-4"
  if (!ok || !std::isfinite(number)) return std::nullopt;
  return number;
}

std::optional<qint64> parse_integer(const QString& text) {
  bool ok = false;
  const qint64 integer = text.toLongLong(&ok);
  if (ok) return integer;
  // As the engine, a number with an integral value is an integer (2.0, 1e3).
  constexpr double kInt64Limit = 9223372036854775808.0;  // 2^63
  const std::optional<double> number = parse_number(text);
  if (number && std::floor(*number) == *number && std::abs(*number) < kInt64Limit)
    return static_cast<qint64>(*number);
  return std::nullopt;
}

/// The text of a number without a needless fraction or exponent (5, 0.25, 1e+20).
QString number_text(const QJsonValue& value) {
  // A JSON integer (not 2.0) converts to a qlonglong variant.
  if (value.toVariant().typeId() == QMetaType::LongLong) return QString::number(value.toInteger());
  return QString::number(value.toDouble(), 'g', QLocale::FloatingPointShortest);
}

// ---- schema helpers ------------------------------------------------------------------------

/// The type names of a schema; empty when it has no "type" (any value).
QStringList type_names(const QJsonObject& schema) {
  const QJsonValue type = schema.value("type");
  if (type.isString()) return {type.toString()};
  QStringList names;
  for (const QJsonValue& name : type.toArray()) names << name.toString();
  return names;
}

bool allows(const QStringList& types, const QString& type) {
  return types.isEmpty() || types.contains(type);
}

bool is_pure_string(const QStringList& types) {
  return types == QStringList{"string"};
}

/// Whether a value can be shown as one of the field's types (as the engine counts them: an
/// integral double is an integer); a value that cannot is shown verbatim, for the engine to judge.
bool has_type(const QJsonValue& value, const QString& type) {
  if (type == "object") return value.isObject();
  if (type == "array") return value.isArray();
  if (type == "string") return value.isString();
  if (type == "integer") {
    if (!value.isDouble()) return false;
    const double number = value.toDouble();
    return std::isfinite(number) && std::floor(number) == number;
  }
  if (type == "number") return value.isDouble();
  if (type == "boolean") return value.isBool();
  if (type == "null") return value.isNull();
  return false;
}

QJsonArray enum_values(const QJsonObject& schema) {
  return schema.value("enum").toArray();
}

/// How an enum item or default is shown: strings bare, everything else as JSON.
QString display_text(const QJsonValue& value) {
  if (value.isString())
    return value.toString().isEmpty() ? QStringLiteral("\"\"") : value.toString();
  return json_text(value);
}

/// Whether the text of a field counts as unset.
bool blank(const QString& text, const QStringList& types) {
  return is_pure_string(types) ? text.isEmpty() : text.trimmed().isEmpty();
}

/// The value of a text input, read by the types the schema allows (see the class comment);
/// nullopt when no allowed type accepts it. `text` is not empty.
std::optional<QJsonValue> read_text(const QString& text, const QStringList& types) {
  if (is_pure_string(types))
    return text == QStringLiteral("\"\"") ? QJsonValue(QStringLiteral("")) : QJsonValue(text);
  const QString trimmed = text.trimmed();
  if (allows(types, "null") && trimmed == "null") return QJsonValue(QJsonValue::Null);
  if (allows(types, "boolean") && (trimmed == "true" || trimmed == "false"))
    return QJsonValue(trimmed == "true");
  if (allows(types, "integer"))
    if (const std::optional<qint64> integer = parse_integer(trimmed)) return QJsonValue(*integer);
  if (allows(types, "number"))
    if (const std::optional<double> number = parse_number(trimmed)) return QJsonValue(*number);
  if ((allows(types, "array") && trimmed.startsWith('[')) ||
      (allows(types, "object") && trimmed.startsWith('{'))) {
    const std::optional<QJsonValue> parsed = parse_json(trimmed);
    if (parsed && (parsed->isArray() ? allows(types, "array") : allows(types, "object")))
      return parsed;
  }
  if (allows(types, "string")) {
    if (trimmed.startsWith('"'))
      if (const std::optional<QJsonValue> quoted = parse_json(trimmed);
          quoted && quoted->isString())
        return quoted;
    return QJsonValue(text);
  }
  return std::nullopt;
}

/// The text that read_text() turns back into `value`; nullopt when there is none.
std::optional<QString> text_for(const QJsonValue& value, const QStringList& types) {
  QStringList candidates;
  if (value.isString()) {
    const QString string = value.toString();
    candidates << (string.isEmpty() && is_pure_string(types) ? QStringLiteral("\"\"") : string)
               << json_text(value);
  } else if (value.isDouble()) {
    candidates << number_text(value);
  } else {
    candidates << json_text(value);  // null, true, false, [..], {..}
  }
  for (const QString& candidate : candidates) {
    if (blank(candidate, types)) continue;
    const std::optional<QJsonValue> read_back = read_text(candidate, types);
    if (read_back && same_json(*read_back, value)) return candidate;
  }
  return std::nullopt;
}

/// What a text that no allowed type accepts is sent to the engine as: its JSON value when it is
/// JSON ("1.5" in an integer field), else the text as a string ("abc"), so that the engine's
/// message shows what was typed.
QJsonValue unreadable_value(const QString& text) {
  const std::optional<QJsonValue> parsed = parse_json(text.trimmed());
  return parsed ? *parsed : QJsonValue(text);
}

void make_small(QLabel* label) {
  QFont font = label->font();
  if (font.pointSizeF() > 0) {  // -1 for fonts sized in pixels
    font.setPointSizeF(font.pointSizeF() * 0.9);
    label->setFont(font);
  }
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
}

}  // namespace

// ---- SchemaForm ------------------------------------------------------------------------------

struct SchemaForm::Field {
  enum class Kind { check, choice, text };

  QString name;
  QJsonObject schema;
  QStringList types;  // empty: any JSON value
  bool required = false;
  std::optional<QJsonValue> default_value;
  Kind kind = Kind::text;
  // The widgets are children of rows_ and die with it; the pointers are only used while it lives.
  QCheckBox* check = nullptr;
  QComboBox* choice = nullptr;
  QLineEdit* text = nullptr;
  QWidget* input = nullptr;  // the one of check/choice/text in use
  QLabel* problem_label = nullptr;
  QLabel* name_label = nullptr;
  QLabel* description_label = nullptr;  // null without a description
  QString description;                  // the schema's
  QString expects;  // what the field accepts, in the engine's words (after the first check)
  QString hint;     // how to type what the field accepts
  QString tooltip;  // description, what the field accepts and the hint
  QString problem;  // shown now; "" when none
  /// A value from set_values() that the input cannot show faithfully; used as is until the user
  /// edits the field.
  std::optional<QJsonValue> verbatim;
};

SchemaForm::SchemaForm(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  unknown_label_ = new QLabel(this);
  unknown_label_->setWordWrap(true);
  unknown_label_->setTextFormat(Qt::RichText);
  unknown_label_->setStyleSheet(QStringLiteral("color: %1;").arg(problem_color()));
  unknown_label_->hide();
  connect(unknown_label_, &QLabel::linkActivated, this, [this] { remove_unknown_options(); });
  layout->addWidget(unknown_label_);
  layout->addStretch(1);
  connect(&checker_, &OptionsChecker::checked, this, &SchemaForm::apply_check);
  set_schema(QJsonObject());
}

SchemaForm::~SchemaForm() = default;

void SchemaForm::set_schema(const QJsonObject& schema) {
  // The old rows may be the sender of the signal being handled: cut them off now, delete later.
  for (const std::unique_ptr<Field>& field : fields_)
    QObject::disconnect(field->input, nullptr, this, nullptr);
  fields_.clear();
  if (rows_) {
    rows_->hide();
    layout()->removeWidget(rows_);
    rows_->deleteLater();
  }
  schema_ = schema;
  unknown_options_ = QJsonObject();
  checked_options_ = QJsonObject();
  bad_options_.clear();
  problems_.clear();
  show_unknown_options({}, false);

  rows_ = new QWidget(this);
  form_ = new QFormLayout(rows_);
  form_->setContentsMargins(0, 0, 0, 0);
  form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  static_cast<QVBoxLayout*>(layout())->insertWidget(1, rows_);

  const QJsonObject properties = schema.value("properties").toObject();
  QStringList required;
  for (const QJsonValue& name : schema.value("required").toArray())
    if (properties.contains(name.toString())) required << name.toString();
  QStringList order;
  for (const QString& name : properties.keys())
    if (required.contains(name)) order << name;
  for (const QString& name : properties.keys())
    if (!required.contains(name)) order << name;

  for (const QString& name : order) {
    auto field = std::make_unique<Field>();
    field->name = name;
    field->schema = properties.value(name).toObject();
    field->types = type_names(field->schema);
    field->required = required.contains(name);
    if (field->schema.contains("default")) field->default_value = field->schema.value("default");
    if (!enum_values(field->schema).isEmpty())
      field->kind = Field::Kind::choice;
    else if (field->types == QStringList{"boolean"})
      field->kind = Field::Kind::check;
    add_row(*field);
    clear_field(*field);  // shows the default (a checkbox whose default is true starts checked)
    fields_.push_back(std::move(field));
  }
  if (fields_.empty() && !schema.isEmpty()) {
    auto* none = new QLabel(tr("This plugin has no options."), rows_);
    none->setEnabled(false);
    form_->addRow(none);
  }
}

void SchemaForm::add_row(Field& field) {
  const QString description = field.schema.value("description").toString();
  field.description = description;
  if (field.kind == Field::Kind::text && is_pure_string(field.types) &&
      field.schema.value("minLength").toInt(0) == 0)
    field.hint = tr("Type \"\" for an empty string.");
  update_tooltip(field);

  switch (field.kind) {
    case Field::Kind::check: {
      field.check = new QCheckBox(rows_);
      if (field.default_value)
        field.check->setText(tr("(default: %1)").arg(display_text(*field.default_value)));
      connect(field.check, &QCheckBox::clicked, this, [this, &field] { on_user_edit(field); });
      field.input = field.check;
      break;
    }
    case Field::Kind::choice: {
      field.choice = new QComboBox(rows_);
      field.choice->addItem(field.default_value
                                ? tr("(default: %1)").arg(display_text(*field.default_value))
                                : tr("(not set)"),
                            -1);
      const QJsonArray choices = enum_values(field.schema);
      for (qsizetype i = 0; i < choices.size(); ++i)
        field.choice->addItem(display_text(choices.at(i)), static_cast<int>(i));
      connect(field.choice, &QComboBox::activated, this, [this, &field] { on_user_edit(field); });
      field.input = field.choice;
      break;
    }
    case Field::Kind::text: {
      field.text = new QLineEdit(rows_);
      field.text->setClearButtonEnabled(true);
      if (field.default_value)
        field.text->setPlaceholderText(tr("default: %1").arg(display_text(*field.default_value)));
      else
        field.text->setPlaceholderText(field.required ? tr("required") : tr("not set"));
      connect(field.text, &QLineEdit::textEdited, this, [this, &field] { on_user_edit(field); });
      field.input = field.text;
      break;
    }
  }
  field.input->setObjectName(field.name);
  field.input->setToolTip(field.tooltip);
  field.input->setProperty("invalid", false);

  auto* cell = new QWidget(rows_);
  auto* cell_layout = new QVBoxLayout(cell);
  cell_layout->setContentsMargins(0, 0, 0, 0);
  cell_layout->setSpacing(2);
  cell_layout->addWidget(field.input);
  field.problem_label = new QLabel(cell);
  make_small(field.problem_label);
  field.problem_label->setStyleSheet(QStringLiteral("color: %1;").arg(problem_color()));
  field.problem_label->hide();
  cell_layout->addWidget(field.problem_label);
  if (!description.isEmpty()) {
    auto* description_label = new QLabel(description, cell);
    make_small(description_label);
    QPalette palette = description_label->palette();
    palette.setColor(QPalette::WindowText, palette.color(QPalette::PlaceholderText));
    description_label->setPalette(palette);
    description_label->setToolTip(field.tooltip);
    field.description_label = description_label;
    cell_layout->addWidget(description_label);
  }

  auto* name_label = new QLabel(field.name, rows_);
  if (field.required) {
    QFont font = name_label->font();
    font.setBold(true);
    name_label->setFont(font);
  }
  field.name_label = name_label;
  name_label->setToolTip(field.required ? tr("Required.") + '\n' + field.tooltip : field.tooltip);
  name_label->setBuddy(field.input);
  form_->addRow(name_label, cell);
}

void SchemaForm::clear_field(Field& field) {
  field.verbatim.reset();
  switch (field.kind) {
    case Field::Kind::check:
      field.check->setChecked(field.default_value && field.default_value->toBool());
      break;
    case Field::Kind::choice:
      field.choice->setCurrentIndex(0);
      break;
    case Field::Kind::text:
      field.text->clear();
      break;
  }
}

void SchemaForm::fill_field(Field& field, const QJsonValue& value) {
  switch (field.kind) {
    case Field::Kind::check:
      if (value.isBool())
        field.check->setChecked(value.toBool());
      else
        field.verbatim = value;
      break;
    case Field::Kind::choice: {
      const QJsonArray choices = enum_values(field.schema);
      const auto match =
          std::find_if(choices.begin(), choices.end(),
                       [&](const QJsonValue& choice) { return same_json(choice, value); });
      if (match != choices.end())
        field.choice->setCurrentIndex(static_cast<int>(match - choices.begin()) + 1);
      else
        field.verbatim = value;
      break;
    }
    case Field::Kind::text: {
      // A value of a type the field does not take keeps its type (and its error) rather than
      // becoming whatever its text reads as.
      const bool typed_right =
          field.types.isEmpty() ||
          std::any_of(field.types.begin(), field.types.end(),
                      [&](const QString& type) { return has_type(value, type); });
      const std::optional<QString> text = typed_right ? text_for(value, field.types) : std::nullopt;
      if (text) {
        field.text->setText(*text);
      } else {
        field.verbatim = value;
        field.text->setText(json_text(value));
      }
      break;
    }
  }
}

void SchemaForm::set_values(const QJsonObject& options) {
  for (const std::unique_ptr<Field>& field : fields_) clear_field(*field);
  unknown_options_ = QJsonObject();
  for (auto it = options.begin(); it != options.end(); ++it) {
    if (Field* field = find(it.key()))
      fill_field(*field, it.value());
    else
      unknown_options_.insert(it.key(), it.value());
  }
  validate(0);
}

SchemaForm::Reading SchemaForm::read(const Field& field) const {
  if (field.verbatim) return {true, true, *field.verbatim};
  switch (field.kind) {
    case Field::Kind::check: {
      const bool checked = field.check->isChecked();
      const bool by_default = field.default_value && field.default_value->toBool();
      if (!field.required && checked == by_default) return {};
      return {true, true, QJsonValue(checked)};
    }
    case Field::Kind::choice: {
      const int index = field.choice->currentData().toInt();
      if (field.choice->currentIndex() <= 0 || index < 0) return {};
      return {true, true, enum_values(field.schema).at(index)};
    }
    case Field::Kind::text: {
      const QString text = field.text->text();
      if (blank(text, field.types)) return {};
      const std::optional<QJsonValue> value = read_text(text, field.types);
      if (!value) return {true, false, QJsonValue()};
      return {true, true, *value};
    }
  }
  return {};
}

QJsonObject SchemaForm::current_options() const {
  QJsonObject options;
  for (const std::unique_ptr<Field>& field : fields_) {
    const Reading reading = read(*field);
    if (!reading.set) continue;
    options.insert(field->name,
                   reading.readable ? reading.value : unreadable_value(field->text->text()));
  }
  for (auto it = unknown_options_.begin(); it != unknown_options_.end(); ++it)
    options.insert(it.key(), it.value());
  return options;
}

bool SchemaForm::checked_fine(const QString& option, const QJsonValue& value) const {
  return checked_options_.contains(option) && same_json(checked_options_.value(option), value) &&
         !bad_options_.contains(option);
}

QJsonObject SchemaForm::values() const {
  QJsonObject options;
  for (const std::unique_ptr<Field>& field : fields_) {
    const Reading reading = read(*field);
    if (reading.set && reading.readable && checked_fine(field->name, reading.value))
      options.insert(field->name, reading.value);
  }
  for (auto it = unknown_options_.begin(); it != unknown_options_.end(); ++it)
    if (checked_fine(it.key(), it.value())) options.insert(it.key(), it.value());
  return options;
}

void SchemaForm::validate(int delay_ms) {
  checker_.request(schema_, current_options(), delay_ms);
}

bool SchemaForm::checking() const {
  return checker_.busy();
}

void SchemaForm::apply_check(const OptionsCheck& check) {
  // An answer about another schema or other values than the form holds now is stale.
  if (check.schema != schema_ || check.options != current_options()) return;
  problems_.clear();
  bad_options_.clear();
  checked_options_ = check.error.isEmpty() ? check.options : QJsonObject();
  for (const std::unique_ptr<Field>& field : fields_) {
    if (check.expects.contains(field->name)) {
      field->expects = check.expects.value(field->name).toString();
      update_tooltip(*field);
    }
  }
  QStringList form_level;
  if (!check.error.isEmpty()) {
    for (const std::unique_ptr<Field>& field : fields_) show_problem(*field, {});
    form_level << tr("The options cannot be checked: %1").arg(check.error);
    problems_ = form_level;
    show_unknown_options(form_level, false);
    Q_EMIT validated(problems_);
    return;
  }
  for (const std::unique_ptr<Field>& field : fields_) {
    QString problem;
    for (const OptionProblem& p : check.problems)
      if (p.option == field->name) problem = p.text();
    show_problem(*field, problem);
    if (!problem.isEmpty()) {
      problems_ << problem;
      bad_options_.insert(field->name);
    }
  }
  bool removable = false;
  for (const OptionProblem& p : check.problems) {
    if (find(p.option)) continue;
    form_level << p.text();
    if (!p.option.isEmpty()) {
      bad_options_.insert(p.option);
      removable = removable || unknown_options_.contains(p.option);
    }
  }
  show_unknown_options(form_level, removable);
  problems_ += form_level;
  Q_EMIT validated(problems_);
}

void SchemaForm::update_tooltip(Field& field) {
  QStringList parts;
  if (!field.description.isEmpty()) parts << field.description;
  QString accepts;
  if (!field.expects.isEmpty()) accepts = tr("Expects %1.").arg(field.expects);
  if (!field.hint.isEmpty())
    accepts += (accepts.isEmpty() ? QString() : QStringLiteral(" ")) + field.hint;
  if (!accepts.isEmpty()) parts << accepts;
  field.tooltip = parts.join('\n');
  if (field.input)
    field.input->setToolTip(field.problem.isEmpty()
                                ? field.tooltip
                                : field.tooltip + QStringLiteral("\n\n") + field.problem);
  if (field.name_label)
    field.name_label->setToolTip(field.required ? tr("Required.") + '\n' + field.tooltip
                                                : field.tooltip);
  if (field.description_label) field.description_label->setToolTip(field.tooltip);
}

void SchemaForm::show_problem(Field& field, const QString& message) {
  if (field.problem == message) return;
  field.problem = message;
  const bool invalid = !message.isEmpty();
  // Under the field the name is redundant: "expected an integer >= 0, got "abc"".
  const QString prefix = field.name + QStringLiteral(": ");
  const QString shown = message.startsWith(prefix) ? message.mid(prefix.size()) : message;
  field.problem_label->setText(shown);
  field.problem_label->setVisible(invalid);
  field.input->setProperty("invalid", invalid);
  update_tooltip(field);
  field.input->setStyleSheet(
      invalid ? QStringLiteral("%1 { border: 1px solid %2; border-radius: 2px; }")
                    .arg(QString::fromLatin1(field.input->metaObject()->className()), problem_color())
              : QString());
}

void SchemaForm::show_unknown_options(const QStringList& messages, bool removable) {
  if (messages.isEmpty()) {
    unknown_label_->clear();
    unknown_label_->hide();
    return;
  }
  QStringList lines;
  for (const QString& message : messages) lines << message.toHtmlEscaped();
  unknown_label_->setText(
      lines.join("<br>") +
      (removable ? QStringLiteral(" <a href=\"remove\">%1</a>").arg(tr("Remove these options"))
                 : QString()));
  unknown_label_->show();
}

void SchemaForm::remove_unknown_options() {
  // Those the engine refused (all of them under "additionalProperties": false) go.
  for (const QString& key : unknown_options_.keys())
    if (bad_options_.contains(key)) unknown_options_.remove(key);
  validate(0);
  Q_EMIT changed();
}

void SchemaForm::on_user_edit(Field& field) {
  field.verbatim.reset();
  validate();
  Q_EMIT changed();
}

SchemaForm::Field* SchemaForm::find(const QString& option) const {
  for (const std::unique_ptr<Field>& field : fields_)
    if (field->name == option) return field.get();
  return nullptr;
}

QWidget* SchemaForm::field(const QString& option) const {
  const Field* found = find(option);
  return found ? found->input : nullptr;
}

QString SchemaForm::field_problem(const QString& option) const {
  const Field* found = find(option);
  return found ? found->problem : QString();
}

QStringList SchemaForm::option_names() const {
  QStringList names;
  for (const std::unique_ptr<Field>& field : fields_) names << field->name;
  return names;
}

}  // namespace tandem::gui
