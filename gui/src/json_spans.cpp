#include "json_spans.hpp"

#include <QJsonArray>
#include <QJsonDocument>

namespace tandem::gui {

namespace {

// A recursive-descent reader of valid JSON that records spans; on anything else it stops, and
// what it has read stays in the tree.
class Scanner {
 public:
  explicit Scanner(const QString& text) : text_(text) {}

  JsonScan run() {
    JsonScan scan;
    skip_space();
    if (at_end()) return scan;
    scan.root = std::make_unique<JsonSpan>();
    value(*scan.root);
    skip_space();
    scan.complete = ok_ && at_end();
    return scan;
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  QChar peek() const { return at_end() ? QChar() : text_[pos_]; }
  void skip_space() {
    while (!at_end() && peek().isSpace()) ++pos_;
  }

  void value(JsonSpan& span) {
    span.start = static_cast<int>(pos_);
    const QChar c = peek();
    if (c == '{' || c == '[') {
      span.object = c == '{';
      span.array = !span.object;
      container(span);
    } else if (c == '"') {
      string();
    } else {
      while (!at_end() && !QString(",]} \t\r\n").contains(peek())) ++pos_;
      if (static_cast<int>(pos_) == span.start) ok_ = false;
    }
    span.end = static_cast<int>(pos_);
  }

  void string() {
    ++pos_;  // the opening quote
    while (!at_end() && peek() != '"') pos_ += peek() == '\\' ? 2 : 1;
    if (at_end()) {
      ok_ = false;
      pos_ = text_.size();
      return;
    }
    ++pos_;
  }

  // "...": the key's value, unescaped as JSON says.
  QString key_text(int from, int to) const {
    return QJsonDocument::fromJson(("[" + text_.mid(from, to - from) + "]").toUtf8())
        .array()
        .at(0)
        .toString();
  }

  void container(JsonSpan& span) {
    const QChar close = span.object ? '}' : ']';
    ++pos_;
    skip_space();
    if (peek() == close) {
      ++pos_;
      return;
    }
    while (ok_) {
      skip_space();
      JsonSpan::Child child;
      if (span.object) {
        if (peek() != '"') {
          ok_ = false;
          return;
        }
        child.key_start = static_cast<int>(pos_);
        string();
        if (!ok_) return;
        child.key = key_text(child.key_start, static_cast<int>(pos_));
        skip_space();
        if (peek() != ':') {
          ok_ = false;
          return;
        }
        ++pos_;
        skip_space();
      }
      child.value = std::make_unique<JsonSpan>();
      JsonSpan& value_span = *child.value;
      span.children.push_back(std::move(child));  // kept even if its value breaks off
      value(value_span);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == close) {
        ++pos_;
        return;
      }
      ok_ = false;
    }
  }

  const QString& text_;
  qsizetype pos_ = 0;
  bool ok_ = true;
};

}  // namespace

const JsonSpan* JsonSpan::child(const QString& key) const {
  if (array && key.startsWith('[') && key.endsWith(']')) {
    bool ok = false;
    const int index = key.mid(1, key.size() - 2).toInt(&ok);
    if (ok && index >= 0 && static_cast<std::size_t>(index) < children.size())
      return children[static_cast<std::size_t>(index)].value.get();
    return nullptr;
  }
  for (const Child& c : children)
    if (object && c.key == key) return c.value.get();
  return nullptr;
}

JsonScan scan_json(const QString& text) {
  return Scanner(text).run();
}

}  // namespace tandem::gui
