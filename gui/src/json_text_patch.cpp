#include "json_text_patch.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonValue>
#include <QStringList>

#include "json_spans.hpp"

namespace tandem::gui {

namespace {

QString compact(const QJsonValue& v) {
  const QByteArray doc = QJsonDocument(QJsonArray{v}).toJson(QJsonDocument::Compact);
  return QString::fromUtf8(doc.mid(1, doc.size() - 2));
}

bool is_scalar_array(const QJsonArray& a) {
  for (const QJsonValue& v : a)
    if (v.isObject() || v.isArray()) return false;
  return true;
}

class Patcher {
 public:
  explicit Patcher(const QString& text) : text_(text), unit_(indent_unit(text)) {}

  // The new text of `node` so that it parses to `target`; `indent` is the indentation of the line
  // the value is on (for what has to be written anew).
  QString render(const JsonSpan& node, const QJsonValue& target, const QString& indent) const {
    if (parsed(node) == target) return slice(node.start, node.end);
    if (node.object && target.isObject()) return render_object(node, target.toObject(), indent);
    if (node.array && target.isArray()) return render_array(node, target.toArray(), indent);
    return write(target, indent);
  }

 private:
  QString slice(int from, int to) const { return text_.mid(from, to - from); }

  QJsonValue parsed(const JsonSpan& node) const {
    return QJsonDocument::fromJson(("[" + slice(node.start, node.end) + "]").toUtf8())
        .array()
        .at(0);
  }

  // The indentation the text uses per level: the smallest positive indentation of a line.
  static QString indent_unit(const QString& text) {
    int best = 0;
    for (const QString& line : text.split('\n')) {
      int n = 0;
      while (n < line.size() && line[n] == ' ') ++n;
      if (n > 0 && n < line.size() && (best == 0 || n < best)) best = n;
    }
    return QString(best > 0 ? best : 2, ' ');
  }

  // The indentation of the line holding offset `at`.
  QString line_indent(int at) const {
    int start = at;
    while (start > 0 && text_[start - 1] != '\n') --start;
    int n = start;
    while (n < text_.size() && text_[n] == ' ') ++n;
    return QString(n - start, ' ');
  }

  // How a container lays out its children: before the first, between two (the first pair's, for
  // what is added), after the last.
  struct Layout {
    QString lead, separator, trail;
  };
  static int child_start(const JsonSpan::Child& c) {
    return c.key_start >= 0 ? c.key_start : c.value->start;
  }
  Layout layout_of(const JsonSpan& node, const QString& indent) const {
    const auto& c = node.children;
    if (c.empty()) return {"\n" + indent + unit_, ",\n" + indent + unit_, "\n" + indent};
    Layout l;
    l.lead = slice(node.start + 1, child_start(c[0]));
    l.trail = slice(c.back().value->end, node.end - 1);
    if (c.size() > 1) {
      l.separator = separator_before(node, 1);
    } else {
      // One child: a new sibling goes on its own line when the first one is, else after ", ".
      const int nl = static_cast<int>(l.lead.lastIndexOf('\n'));
      l.separator = nl >= 0 ? "," + l.lead.mid(nl) : ", ";
    }
    return l;
  }
  // The text between child i - 1 and child i as the user wrote it (blank lines included).
  QString separator_before(const JsonSpan& node, std::size_t i) const {
    return slice(node.children[i - 1].value->end, child_start(node.children[i]));
  }

  // Joins the kept children (by their index in `node`, -1 for one that is added) with the text
  // the user had between them: a kept child keeps the separator before it; an added one, or one
  // that follows what was removed at the front, gets the layout's.
  QString join(const JsonSpan& node, const Layout& l, const std::vector<int>& from,
               const QStringList& parts) const {
    QString out = l.lead;
    for (qsizetype k = 0; k < parts.size(); ++k) {
      const int i = from[static_cast<std::size_t>(k)];
      if (k > 0) out += i > 0 ? separator_before(node, static_cast<std::size_t>(i)) : l.separator;
      out += parts[k];
    }
    return out + l.trail;
  }

  QString render_object(const JsonSpan& node, const QJsonObject& target, const QString& indent) const {
    const Layout l = layout_of(node, indent);
    const QString inner =
        node.children.empty() ? indent + unit_ : line_indent(node.children[0].key_start);
    QStringList members, kept;
    std::vector<int> from;
    for (std::size_t i = 0; i < node.children.size(); ++i) {
      const auto& child = node.children[i];
      if (!target.contains(child.key)) continue;
      kept << child.key;
      from.push_back(static_cast<int>(i));
      members << slice(child.key_start, child.value->start) +
                     render(*child.value, target.value(child.key), inner);
    }
    for (auto it = target.begin(); it != target.end(); ++it) {
      if (kept.contains(it.key())) continue;
      from.push_back(-1);
      members << compact(it.key()) + ": " + write(it.value(), inner);
    }
    if (members.isEmpty()) return "{}";
    return "{" + join(node, l, from, members) + "}";
  }

  QString render_array(const JsonSpan& node, const QJsonArray& target, const QString& indent) const {
    if (target.isEmpty()) return "[]";
    if (node.children.empty()) return write(target, indent);
    const Layout l = layout_of(node, indent);
    const QString inner = line_indent(node.children[0].value->start);
    QStringList elements;
    std::vector<int> from;
    for (qsizetype i = 0; i < target.size(); ++i) {
      const auto index = static_cast<std::size_t>(i);
      const bool kept = index < node.children.size();
      from.push_back(kept ? static_cast<int>(i) : -1);
      elements << (kept ? render(*node.children[index].value, target.at(i), inner)
                        : write(target.at(i), inner));
    }
    return "[" + join(node, l, from, elements) + "]";
  }

  // `v` written anew: scalars and lists of scalars on one line, containers one child a line.
  QString write(const QJsonValue& v, const QString& indent) const {
    if (v.isArray() && is_scalar_array(v.toArray())) {
      QStringList items;
      for (const QJsonValue& e : v.toArray()) items << compact(e);
      return "[" + items.join(", ") + "]";
    }
    if (v.isArray()) {
      if (v.toArray().isEmpty()) return "[]";
      QStringList items;
      for (const QJsonValue& e : v.toArray()) items << indent + unit_ + write(e, indent + unit_);
      return "[\n" + items.join(",\n") + "\n" + indent + "]";
    }
    if (v.isObject()) {
      const QJsonObject o = v.toObject();
      if (o.isEmpty()) return "{}";
      QStringList items;
      for (auto it = o.begin(); it != o.end(); ++it)
        items << indent + unit_ + compact(it.key()) + ": " + write(it.value(), indent + unit_);
      return "{\n" + items.join(",\n") + "\n" + indent + "}";
    }
    return compact(v);
  }

  const QString& text_;
  QString unit_;
};

}  // namespace

QString patch_json_text(const QString& text, const QJsonObject& target) {
  const QString rewritten = QString::fromUtf8(QJsonDocument(target).toJson(QJsonDocument::Indented));
  const JsonScan scan = scan_json(text);
  if (!scan.complete || !scan.root->object) return rewritten;
  const Patcher patcher(text);
  const JsonSpan& root = *scan.root;
  const QString patched =
      text.left(root.start) + patcher.render(root, target, QString()) + text.mid(root.end);
  // Whatever the text held, the result must be the config the form made.
  if (QJsonDocument::fromJson(patched.toUtf8()).object() != target) return rewritten;
  return patched;
}

}  // namespace tandem::gui
