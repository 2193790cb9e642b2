// An option form built from a plugin's options schema (the "options_schema" of each plugin in
// `tandem plugins --json`), used to edit the "options" of a callback entry of a run config.
#pragma once

#include <memory>
#include <vector>

#include <QJsonObject>
#include <QJsonValue>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QWidget>

#include "options_checker.hpp"

class QFormLayout;
class QLabel;

namespace tandem::gui {

/// One row per property of the schema (required options first, then by name): the option name
/// (bold when required), the input, the problem of the field in red (when it has one) and the
/// description in small grey text (also the tooltip, with what the field accepts).
///
/// The form keeps no validator of its own: the engine checks the options (`tandem check-options
/// --json`, through an OptionsChecker: the same validator and the same words as `tandem train`),
/// so validation is asynchronous: validate() asks, validated() answers.
///
/// Inputs, by the property's schema:
/// - "enum": a QComboBox; item 0 is "(default: X)" or "(not set)" and means unset.
/// - "type": "boolean": a QCheckBox showing the default; the option is set when it differs from
///   the default (when there is none, when checked), or always when required.
/// - anything else: a QLineEdit, empty (only whitespace, for non-strings) = unset, the default as
///   placeholder. Its text is read by what the type allows, first match wins: "null"; true/false;
///   an integer (also 2.0 or 1e3); a number; JSON text starting with [ or { (array/object); a
///   string. A pure string field takes the text verbatim, except that `""` is the empty string;
///   in a field that also allows other types, a JSON string literal ("5") is a string. Text that
///   no allowed type reads is sent to the engine as typed (as JSON when it is JSON, else as a
///   string), so its message shows it.
///
/// A value given to set_values() that its input cannot show (a string for a checkbox, a value
/// outside the enum, a string "3" for an integer field) is kept as it is and checked until the
/// user edits that field. Keys that are not properties are sent too: the engine reports them as
/// unknown options under "additionalProperties": false (the form then offers to remove them);
/// otherwise values() passes them through unchanged once the engine accepts them.
///
/// Ownership: a plain QWidget; its rows are child widgets, replaced by set_schema(); it owns the
/// engine process of a check in flight. Not thread-safe: use it from the GUI thread only.
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
  /// asks the engine to check them (validated() follows). Keys not in the schema are checked too.
  /// Does not emit changed().
  void set_values(const QJsonObject& options);

  /// The options the user set, as the engine last accepted them: only keys whose field is
  /// non-empty / differs from the default, typed as the schema says (integer -> JSON integer,
  /// number -> double, boolean, null, string, arrays/objects parsed from JSON text). Fields the
  /// engine found invalid, or has not checked yet in their current state, are left out.
  QJsonObject values() const;

  /// Asks the engine to check every field (type, enum, bounds, minLength, items, required,
  /// unknown keys) once no new request came for `delay_ms`; validated() follows with the answer,
  /// which also marks bad fields inline (red border, the message under the field and in its
  /// tooltip, the widget property "invalid" = true). Only the answer for the latest state counts.
  void validate(int delay_ms = 100);
  /// The problems of the last answer, one per option, each starting with its path ("patience:
  /// expected an integer >= 0, got \"abc\""), in form order, other options last; or one line
  /// saying why the engine could not check them. Empty before the first answer.
  const QStringList& problems() const { return problems_; }
  /// A check is waiting or running: problems() may be about to change.
  bool checking() const;

  /// The input widget of an option (for tests and keyboard focus); nullptr if unknown. Owned by
  /// the form.
  QWidget* field(const QString& option) const;
  /// The problem currently shown for an option (as in validate(), with the name), or "" when the
  /// field is fine, was never validated, or is unknown.
  QString field_problem(const QString& option) const;
  /// The options of the schema in form order.
  QStringList option_names() const;

 Q_SIGNALS:
  /// Emitted whenever the user edits a field (a check has been asked for).
  void changed();
  /// The engine's answer to the latest validate() or set_values(): problems() as it is now.
  void validated(const QStringList& problems);

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
  /// What the engine is asked to check: every set field (unreadable text as typed) and the keys
  /// without a row.
  QJsonObject current_options() const;
  /// The engine's last answer covered `value` for `option` and found nothing wrong.
  bool checked_fine(const QString& option, const QJsonValue& value) const;
  void apply_check(const OptionsCheck& check);
  void update_tooltip(Field& field);
  void show_problem(Field& field, const QString& message);
  void show_unknown_options(const QStringList& messages, bool removable);
  void clear_field(Field& field);
  void fill_field(Field& field, const QJsonValue& value);
  void on_user_edit(Field& field);
  void remove_unknown_options();

  QJsonObject schema_;
  QJsonObject unknown_options_;  // keys from set_values() without a row
  OptionsChecker checker_;
  QJsonObject checked_options_;  // what the engine's last answer was about
  QSet<QString> bad_options_;    // the options it found a problem with
  QStringList problems_;
  std::vector<std::unique_ptr<Field>> fields_;  // form order; widgets owned by rows_
  QWidget* rows_ = nullptr;                     // child; replaced by set_schema()
  QFormLayout* form_ = nullptr;                 // layout of rows_
  QLabel* unknown_label_ = nullptr;             // child; problems of unknown_options_
};

}  // namespace tandem::gui
