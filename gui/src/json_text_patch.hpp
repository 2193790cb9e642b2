// Editing a JSON text the way a person would: when the form changes a value of the run config,
// the editor's text (and so the user's file, once saved) changes only where the value is — the
// user's key order, indentation, line breaks and number spellings elsewhere stay as they were.
// Qt's own writer (QJsonDocument::toJson) would sort every key and re-indent the whole file.
#pragma once

#include <QJsonObject>
#include <QString>

namespace tandem::gui {

/// `text` changed so that it parses to `target`: every value that already equals its target is
/// kept as written; a changed scalar is rewritten in place; members and elements that are added
/// go after the existing ones, indented like their siblings (Qt's key order within what is
/// added); removed members go with their separator. When `text` is not a JSON object, the result
/// is `target` written by Qt (indented). The result always parses to `target`.
QString patch_json_text(const QString& text, const QJsonObject& target);

}  // namespace tandem::gui
