#include "json_locator.hpp"

#include <QStringList>

#include "json_spans.hpp"

namespace tandem::gui {

namespace {

// "a.b[2].c" -> {"a", "b", "[2]", "c"}
QStringList split_path(const QString& path) {
  QStringList parts;
  QString current;
  for (const QChar c : path) {
    if (c == '.') {
      if (!current.isEmpty()) parts << current;
      current.clear();
    } else if (c == '[') {
      if (!current.isEmpty()) parts << current;
      current = "[";
    } else if (c == ']') {
      parts << current + "]";
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.isEmpty()) parts << current;
  return parts;
}

}  // namespace

TextPosition position_of_offset(const QString& text, int offset) {
  TextPosition p;
  p.offset = offset;
  for (int i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

std::optional<TextPosition> locate_json_path(const QString& json_text, const QString& path) {
  const QStringList target = split_path(path);
  if (target.isEmpty() || json_text.trimmed().isEmpty()) return std::nullopt;
  const JsonScan scan = scan_json(json_text);
  if (!scan.root) return std::nullopt;
  // The deepest part of the path the text holds (what was read before a syntax error counts).
  const JsonSpan* at = scan.root.get();
  for (const QString& part : target) {
    const JsonSpan* next = at->child(part);
    if (!next) break;
    at = next;
  }
  return position_of_offset(json_text, at->start);
}

}  // namespace tandem::gui
