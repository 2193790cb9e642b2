// An option form built from a plugin's options schema (the "options_schema" of each plugin in
// `tandem plugins --json`), used to edit the "options" of a callback entry of a run config.
#pragma once

#include <memory>
#include <vector>

#include <QJsonObject>
#include <QJsonValue>
#include <QString>
#include <QStringList>
#include <QWidget>

class QFormLayout;
class QLabel;

namespace tandem::gui {

/// One row per property of the schema (required options first, then by name): the option name
/// (bold when required), the input, the problem of the field in red (when it has one) and the
/// description in small grey text (also the tooltip). The schema is the subset of JSON Schema that
/// the engine accepts (docs/plugins.md); the checks mirror the engine's validate_options().
///
/// Inputs, by the property's schema:
/// - "enum": a QComboBox; item 0 is "(default: X)" or "(not set)" and means unset.
/// - "type": "boolean": a QCheckBox showing the default; the option is set when it differs from
///   the default (when there is none, when checked), or always when required.
/// - anything else: a QLineEdit, empty (only whitespace, for non-strings) = unset, the default as
///   placeholder. Its text is read by what the type allows, first match wins: "null"; true/false;
///   an integer (also 2.0 or 1e3); a number; JSON text starting with [ or { (array/object); a
///   string. A pure string field takes the text verbatim, except that `""` is the empty string;
///   in a field that also allows other types, a JSON string literal ("5") is a string.
///
/// A value given to set_values() that its input cannot show (a string for a checkbox, a value
/// outside the enum, a string "3" for an integer field) is kept as it is, checked and reported by
/// validate() until the user edits that field. Keys that are not properties are reported as unknown
/// options when the schema says "additionalProperties": false (the form then offers to remove
/// them); otherwise values() passes them through unchanged (checked against an
/// "additionalProperties" schema, if any).
///
/// Ownership: a plain QWidget; its rows are child widgets, replaced by set_schema(). Not
/// thread-safe: use it from the GUI thread only.
class SchemaForm : public QWidget {
  Q_OBJECT

 public:
  explicit SchemaForm(QWidget* parent = nullptr);
  ~SchemaForm() override;

  /// Rebuilds the form for `schema` (a plugin's options_schema); clears previous values and marks.
  /// Pointers returned by field() before the call become invalid (the old rows are deleted later).
  void set_schema(const QJsonObject& schema);
  /// The schema given to the last set_schema().
  const QJsonObject& schema() const { return schema_; }

  /// Replaces every field's value by those of `options` (fields absent from it become unset) and
  /// re-validates, marking bad fields. Keys not in the schema are reported by validate(). Does not
  /// emit changed().
  void set_values(const QJsonObject& options);

  /// The options the user set: only keys whose field is non-empty / differs from the default,
  /// typed as the schema says (integer -> JSON integer, number -> double, boolean, null, string,
  /// arrays/objects parsed from JSON text). Invalid fields are left out.
  QJsonObject values() const;

  /// Checks every field against the schema (type, enum, minimum/maximum/exclusive bounds,
  /// minLength, items, required, unknown keys from set_values); marks bad fields inline (red
  /// border, the message under the field and in its tooltip, the widget property "invalid" = true)
  /// and returns one message per problem, each starting with the option name
  /// ("patience: expected an integer ≥ 0, got \"abc\""), in form order, unknown options last.
  QStringList validate();

  /// The input widget of an option (for tests and keyboard focus); nullptr if unknown. Owned by
  /// the form.
  QWidget* field(const QString& option) const;
  /// The problem currently shown for an option (as in validate(), with the name), or "" when the
  /// field is fine, was never validated, or is unknown.
  QString field_problem(const QString& option) const;
  /// The options of the schema in form order.
  QStringList option_names() const;

 Q_SIGNALS:
  /// Emitted whenever the user edits a field (after re-validation).
  void changed();

 private:
  struct Field;
  /// What a field holds now.
  struct Reading {
    bool set = false;      // false: unset, the engine will use the default
    bool readable = true;  // false: text that no allowed type accepts
    QJsonValue value;      // when set and readable
  };

  Field* find(const QString& option) const;
  void add_row(Field& field);
  Reading read(const Field& field) const;
  QString check(const Field& field) const;
  void show_problem(Field& field, const QString& message);
  void show_unknown_options(const QStringList& messages);
  QStringList check_unknown_options() const;
  void clear_field(Field& field);
  void fill_field(Field& field, const QJsonValue& value);
  void on_user_edit(Field& field);
  void remove_unknown_options();

  QJsonObject schema_;
  QJsonObject unknown_options_;                 // keys from set_values() without a row
  std::vector<std::unique_ptr<Field>> fields_;  // form order; widgets owned by rows_
  QWidget* rows_ = nullptr;                     // child; replaced by set_schema()
  QFormLayout* form_ = nullptr;                 // layout of rows_
  QLabel* unknown_label_ = nullptr;             // child; problems of unknown_options_
};

}  // namespace tandem::gui
