#include "json_locator.hpp"

#include <QStringList>

namespace tandem::gui {

namespace {

// A small JSON scanner that records where each value starts, by path. It only needs to be right
// for valid JSON; on anything else it stops and the caller keeps what was found so far.
class Scanner {
 public:
  Scanner(const QString& text, const QStringList& target) : text_(text), target_(target) {}

  void run() {
    QStringList path;
    skip_space();
    value(path);
  }
  int best_depth() const { return best_depth_; }
  int best_offset() const { return best_offset_; }

 private:
  void record(const QStringList& path, int offset) {
    // Depth of the shared prefix with the target; keep the deepest (first seen wins on ties).
    if (path.size() > target_.size()) return;
    for (qsizetype i = 0; i < path.size(); ++i)
      if (path[i] != target_[i]) return;
    const int depth = static_cast<int>(path.size());
    if (depth > best_depth_) {
      best_depth_ = depth;
      best_offset_ = offset;
    }
  }

  bool at_end() const { return pos_ >= text_.size(); }
  QChar peek() const { return at_end() ? QChar() : text_[pos_]; }
  void skip_space() {
    while (!at_end() && peek().isSpace()) ++pos_;
  }

  bool value(QStringList& path) {
    if (!ok_) return false;
    record(path, static_cast<int>(pos_));
    const QChar c = peek();
    if (c == '{' || c == '[') return container(path, c == '{');
    if (c == '"') {
      string();
      return ok_;
    }
    while (!at_end() && !QString(",]} \t\r\n").contains(peek())) ++pos_;  // number, literal
    return ok_;
  }

  QString string() {
    QString out;
    ++pos_;  // opening quote
    while (!at_end() && peek() != '"') {
      if (peek() == '\\') ++pos_;
      if (!at_end()) out += text_[pos_++];
    }
    if (at_end()) ok_ = false;
    ++pos_;
    return out;
  }

  // An object's members or an array's elements: each value's path gets its key or "[i]".
  bool container(QStringList& path, bool is_object) {
    const QChar close = is_object ? '}' : ']';
    ++pos_;
    skip_space();
    if (peek() == close) {
      ++pos_;
      return true;
    }
    for (int i = 0; ok_; ++i) {
      skip_space();
      QString key = QString("[%1]").arg(i);
      if (is_object) {
        if (peek() != '"') return ok_ = false;
        key = string();
        skip_space();
        if (peek() != ':') return ok_ = false;
        ++pos_;
        skip_space();
      }
      path.push_back(key);
      value(path);
      path.pop_back();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == close) {
        ++pos_;
        return true;
      }
      return ok_ = false;
    }
    return false;
  }

  const QString& text_;
  QStringList target_;
  qsizetype pos_ = 0;
  bool ok_ = true;
  int best_depth_ = -1;
  int best_offset_ = 0;
};

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
  Scanner scanner(json_text, target);
  scanner.run();
  if (scanner.best_depth() < 0) return std::nullopt;
  return position_of_offset(json_text, scanner.best_offset());
}

}  // namespace tandem::gui
