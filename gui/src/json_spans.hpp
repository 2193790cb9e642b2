// Where each value of a JSON text sits: the one scanner behind locating an engine error's JSON
// path in the editor (json_locator) and editing the text in place (json_text_patch).
#pragma once

#include <QString>
#include <memory>
#include <vector>

namespace tandem::gui {

/// One value of the text: [start, end) in characters. Containers hold their members (objects:
/// with each key, unescaped, and where the key's opening quote is) or elements.
struct JsonSpan {
  int start = 0;
  int end = 0;
  bool object = false;
  bool array = false;
  struct Child {
    int key_start = -1;  // objects only
    QString key;         // objects only
    std::unique_ptr<JsonSpan> value;
  };
  std::vector<Child> children;

  /// The child at `key` (an object's member, the first of that name) or "[i]" (an element).
  const JsonSpan* child(const QString& key) const;
};

struct JsonScan {
  /// What was read: the whole value when `complete`, else the values read before the first
  /// syntax error (the one being read then ends there). Null when the text starts no value.
  std::unique_ptr<JsonSpan> root;
  bool complete = false;  // one valid JSON value and nothing but whitespace after it
};

JsonScan scan_json(const QString& text);

}  // namespace tandem::gui
