// FilepathTemplate: Keras ModelCheckpoint's `filepath.format(epoch=..., **logs)` in C++.
//
// A template is text with replacement fields in Python str.format syntax: "{name}" or
// "{name:spec}", "{{" and "}}" for literal braces. The format spec is Python's
// [[fill]align][sign][#][0][width][.precision][type] with types d x X o b (integers), f F e E g G %
// (numbers) and s; "{epoch:02d}", "{val_loss:.4f}", "{step:>8}". Integer values (epoch, batch,
// step) take any number type; a log value (a double) takes 'd' only when it is a whole number,
// as in Python. Plain value type; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tandem::checkpoint {

/// A value a field may name: an integer (epoch, batch, step) or a log value.
using FieldValue = std::variant<std::int64_t, double>;

class FilepathTemplate {
 public:
  /// Parses `text`. Throws std::invalid_argument with a one-line reason (unbalanced braces, an
  /// empty field, a conversion such as "!r", an unsupported format spec).
  explicit FilepathTemplate(std::string text);

  const std::string& text() const { return text_; }
  /// The field names in order of appearance (duplicates kept).
  std::vector<std::string> fields() const;
  bool uses(const std::string& name) const;
  /// True when the text has no fields at all (every save writes the same file).
  bool constant() const { return fields().empty(); }

  /// The formatted text. A field whose name is not in `values` throws std::out_of_range whose
  /// what() is the missing name; a value the spec cannot format throws std::invalid_argument.
  std::string format(const std::map<std::string, FieldValue>& values) const;

 private:
  struct Spec {
    char fill = ' ';
    char align = 0;  // '<', '>', '^', '=' or 0 (default: numbers right, strings left)
    char sign = '-';
    bool alternate = false;
    int width = 0;
    std::optional<int> precision;
    char type = 0;  // 0 = none
  };
  struct Piece {
    std::string literal;  // when field is empty
    std::string field;
    Spec spec;
  };
  static Spec parse_spec(const std::string& spec);
  static std::string apply(const Spec& spec, const FieldValue& value, const std::string& name);

  std::string text_;
  std::vector<Piece> pieces_;
};

}  // namespace tandem::checkpoint
