// The "csv" dataset type: a table with a header row, read whole with libcsv (RFC 4180: quoted
// fields, "" inside quotes, CRLF or LF). Columns are chosen by name: y names the target columns,
// x the features (default: every other column, in file order). Cells are numbers; a column of
// strings (categories) is read through the mapping the spec declares, "categories": {"colour":
// ["blue", "green", "red"]} → 0, 1, 2, so that training, validation and a later evaluation map
// them alike (the mapping is part of the run config, saved with every checkpoint). An undeclared
// string column is an error that lists its values in the form to paste.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <spdlog/spdlog.h>

#include "data/csv_table.hpp"
#include "data/datasets.hpp"
#include "tandem/error.hpp"

namespace tandem::data {

namespace {

constexpr std::size_t kMaxListedValues = 20;

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// `text` as a JSON string literal; bytes that are not UTF-8 become U+FFFD (a file's cells are
// anything).
// Long cells are cut: a message quotes what identifies the cell, not its megabytes.
std::string quoted(const std::string& text) {
  constexpr std::size_t kShown = 60;
  const bool cut = text.size() > kShown;
  const std::string json = nlohmann::json(cut ? text.substr(0, kShown) : text)
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return cut ? json + "... (" + std::to_string(text.size()) + " characters)" : json;
}

// Whether `text` (trimmed) spells infinity or NaN, which from_chars reads: not a value.
bool names_a_non_number(const std::string& text) {
  return text.find_first_of("iInN") != std::string::npos;
}

std::optional<float> number(const std::string& text) {
  const std::string t = trimmed(text);
  if (t.empty()) return std::nullopt;
  double v = 0;
  const char* end = t.data() + t.size();
  const auto r = std::from_chars(t.data() + (t[0] == '+' ? 1 : 0), end, v);
  if (r.ptr != end) return std::nullopt;
  if (r.ec == std::errc::result_out_of_range) {
    // A number beyond a double, as Python's float() reads it: 1e-400 (or 0.000...1 with 400
    // zeros) is 0, 1e400 infinite (and then refused as beyond float32, like 1e39). strtod tells
    // which (the engine runs in the "C" locale).
    const bool tiny = std::fabs(std::strtod(t.c_str(), nullptr)) < 1.0;
    const float sign = t[0] == '-' ? -1.0f : 1.0f;
    return tiny ? sign * 0.0f : sign * std::numeric_limits<float>::infinity();
  }
  if (r.ec != std::errc()) return std::nullopt;
  return static_cast<float>(v);
}

// "categories": {"colour": ["blue", "green", "red"]} for a column whose cells are strings.
std::string categories_hint(const CsvTable& t, std::size_t column) {
  std::set<std::string> values;
  for (const auto& row : t.rows) values.insert(trimmed(row[column]));
  std::string list;
  std::size_t n = 0;
  for (const std::string& v : values) {
    if (++n > kMaxListedValues) {
      list += ", ...";
      break;
    }
    list += (list.empty() ? "" : ", ") + quoted(v);
  }
  return "\"categories\": {" + quoted(t.header[column]) + ": [" + list + "]}";
}

class CsvDataset final : public Dataset {
 public:
  CsvDataset(std::vector<float> x, std::vector<float> y, std::int64_t rows, Shape x_shape,
             Shape y_shape, std::string description)
      : x_(std::move(x)),
        y_(std::move(y)),
        rows_(rows),
        x_shape_(std::move(x_shape)),
        y_shape_(std::move(y_shape)),
        description_(std::move(description)) {}

  std::int64_t size() const override { return rows_; }
  Shape x_shape() const override { return x_shape_; }
  Shape y_shape() const override { return y_shape_; }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    const std::int64_t xs = shape_size(x_shape_), ys = shape_size(y_shape_);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      if (i < 0 || i >= rows_)
        throw DataError(description_ + ": sample " + std::to_string(i) + " out of range");
      std::copy_n(x_.begin() + i * xs, xs, x + static_cast<std::int64_t>(k) * xs);
      std::copy_n(y_.begin() + i * ys, ys, y + static_cast<std::int64_t>(k) * ys);
    }
  }

  std::string describe() const override { return description_; }

 private:
  std::vector<float> x_, y_;
  std::int64_t rows_;
  Shape x_shape_, y_shape_;
  std::string description_;
};

}  // namespace

CsvSpec parse_csv_spec(ConfigObject& spec, const std::string& base_dir) {
  CsvSpec s;
  s.file = spec.get_string("path");
  if (s.file.empty()) throw ConfigError(spec.path_of("path"), "expected a file name, got ''");
  s.file = resolve_path(base_dir, s.file);
  if (spec.has("y")) s.y = name_list(spec, "y", "column name");  // none: data to predict
  if (spec.has("x")) s.x = name_list(spec, "x", "column name");
  const std::string delimiter = spec.get_string("delimiter", ",");
  if (delimiter.size() != 1 || delimiter == "\"" || delimiter == "\n" || delimiter == "\r")
    throw ConfigError(
        spec.path_of("delimiter"),
        "expected one character (',', ';', '\\t', ...), got " + nlohmann::json(delimiter).dump());
  s.delimiter = delimiter[0];
  if (const nlohmann::json* categories = spec.find("categories")) {
    if (!categories->is_object())
      throw ConfigError(
          spec.path_of("categories"),
          "expected an object of each category column's values, got " + categories->dump());
    for (const auto& [column, values] : categories->items()) {
      const std::string at = json_path_join(spec.path_of("categories"), column);
      if (!values.is_array() || values.empty())
        throw ConfigError(at, "expected a list of the column's values, got " + values.dump());
      std::vector<std::string>& list = s.categories[column];
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (!values[i].is_string())
          throw ConfigError(at + "[" + std::to_string(i) + "]",
                            "expected a string, got " + values[i].dump());
        list.push_back(values[i].get<std::string>());
      }
      if (std::set<std::string>(list.begin(), list.end()).size() != list.size())
        throw ConfigError(at, "lists a value twice");
    }
  } else {
    spec.ignore({"categories"});
  }
  return s;
}

std::shared_ptr<Dataset> open_csv_dataset(const CsvSpec& spec) {
  const CsvTable t = read_csv_table(spec.file, spec.delimiter);
  const std::string where = "'" + spec.file + "'";
  std::map<std::string, std::size_t> index;
  for (std::size_t c = 0; c < t.header.size(); ++c)
    if (!index.emplace(trimmed(t.header[c]), c).second)
      throw DataError(where + ": the column '" + trimmed(t.header[c]) + "' appears twice");
  auto column = [&](const std::string& name) {
    const auto it = index.find(name);
    if (it != index.end()) return it->second;
    std::string have;
    for (const std::string& h : t.header) have += (have.empty() ? "'" : ", '") + trimmed(h) + "'";
    throw DataError(where + ": no column '" + name + "' (it has " + have + ")");
  };
  for (const auto& [name, values] : spec.categories) column(name);
  std::vector<std::size_t> y_cols, x_cols;
  for (const std::string& n : spec.y) y_cols.push_back(column(n));
  if (!spec.x.empty()) {
    for (const std::string& n : spec.x) x_cols.push_back(column(n));
  } else {
    for (std::size_t c = 0; c < t.header.size(); ++c)
      if (std::find(y_cols.begin(), y_cols.end(), c) == y_cols.end()) x_cols.push_back(c);
  }
  if (x_cols.empty()) throw DataError(where + ": no feature columns left besides y");
  // A file without a header row would lose its first row to the column names unseen (pandas'
  // to_csv of unnamed columns writes 0, 1, 2, ... on purpose, so it is only said).
  if (std::all_of(t.header.begin(), t.header.end(),
                  [](const std::string& h) { return number(h).has_value(); }))
    spdlog::warn(
        "{}: the header row, {}{}, is all numbers: if the file has no header, its first "
        "row is read as the column names, not as a sample (add a header row)",
        where, quoted(t.header.front()), t.header.size() > 1 ? ", ..." : "");
  if (t.rows.empty()) throw DataError(where + ": no rows under the header");

  auto value_of = [&](std::size_t row, std::size_t c) -> float {
    const std::string& text = t.rows[row][c];
    const std::string name = trimmed(t.header[c]);
    const std::string place =
        where + ": row " + std::to_string(row + 2) + ", column '" + name + "'";
    if (const auto it = spec.categories.find(name); it != spec.categories.end()) {
      const auto& values = it->second;
      const auto at = std::find(values.begin(), values.end(), trimmed(text));
      if (at == values.end())
        throw DataError(place + ": " + quoted(trimmed(text)) +
                        " is not one of the column's categories in the spec");
      return static_cast<float>(at - values.begin());
    }
    const std::optional<float> v = number(text);
    if (!v)
      throw DataError(place +
                      (trimmed(text).empty() ? std::string(": empty")
                                             : ": " + quoted(text) + " is not a number") +
                      (trimmed(text).empty() ? ""
                                             : "; for a column of categories, declare them: " +
                                                   categories_hint(t, c)));
    if (!std::isfinite(*v))
      throw DataError(place + ": " + quoted(trimmed(text)) +
                      (names_a_non_number(trimmed(text))
                           ? " is not a finite number"
                           : " is beyond float32's range (at most 3.4e38 in magnitude)"));
    return *v;
  };
  const auto rows = static_cast<std::int64_t>(t.rows.size());
  std::vector<float> x, y;
  x.reserve(t.rows.size() * x_cols.size());
  y.reserve(t.rows.size() * y_cols.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    for (std::size_t c : x_cols) x.push_back(value_of(r, c));
    for (std::size_t c : y_cols) y.push_back(value_of(r, c));
  }
  // One target column: a scalar per sample (a class index or a value), as Keras takes (n,).
  const Shape y_shape =
      y_cols.size() == 1 ? Shape{} : Shape{static_cast<std::int64_t>(y_cols.size())};
  return std::make_shared<CsvDataset>(
      std::move(x), std::move(y), rows, Shape{static_cast<std::int64_t>(x_cols.size())}, y_shape,
      "csv: " + spec.file + " (" + std::to_string(rows) + " samples, " +
          std::to_string(x_cols.size()) + " features)");
}

}  // namespace tandem::data
