#include "data/csv_table.hpp"

#include <csv.h>

#include <fstream>
#include <memory>
#include <string_view>

#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem::data {

namespace {

constexpr std::size_t kReadChunk = std::size_t{1} << 16;

// Receives libcsv's fields and rows: the header first, then each row's fields as text. The
// callbacks run inside C code, so they never throw: the first problem is kept in `error`.
struct TableReader {
  CsvTable table;
  std::vector<std::string> row;
  std::int64_t line = 0;  // rows seen, header included
  std::string error;

  static void on_field(void* text, std::size_t size, void* self) noexcept {
    auto* t = static_cast<TableReader*>(self);
    if (t->error.empty()) t->row.emplace_back(text ? static_cast<const char*>(text) : "", size);
  }
  static void on_row(int, void* self) noexcept {
    auto* t = static_cast<TableReader*>(self);
    ++t->line;
    if (!t->error.empty()) return;
    if (t->line == 1) {
      t->table.header = std::move(t->row);
    } else if (t->row.size() != t->table.header.size()) {
      t->error = "row " + std::to_string(t->line) + " has " + std::to_string(t->row.size()) +
                 " fields, the header has " + std::to_string(t->table.header.size());
    } else {
      t->table.rows.push_back(std::move(t->row));
    }
    t->row.clear();
  }
};

struct ParserFree {
  void operator()(csv_parser* p) const { csv_free(p); }
};

}  // namespace

CsvTable read_csv_table(const std::string& file, char delimiter) {
  if (const std::string why = not_a_regular_file(file); !why.empty())
    throw DataError("cannot read '" + file + "': " + why);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError("cannot open '" + file + "'");
  csv_parser parser;
  if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
    throw DataError("cannot read '" + file + "': out of memory");
  const std::unique_ptr<csv_parser, ParserFree> freed(&parser);
  csv_set_delim(&parser, static_cast<unsigned char>(delimiter));
  TableReader t;
  std::vector<char> buffer(kReadChunk);
  // A UTF-8 byte order mark (Excel's "CSV UTF-8") is no part of the first column's name, as
  // Python's utf-8-sig and pandas read it.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  bool first = true;
  while (in && t.error.empty()) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    std::size_t skip = 0;
    if (first && std::string_view(buffer.data(), got).starts_with(kBom)) skip = kBom.size();
    first = false;
    got -= skip;
    if (csv_parse(&parser, buffer.data() + skip, got, TableReader::on_field, TableReader::on_row,
                  &t) != got)
      throw DataError("'" + file + "': not valid CSV after row " + std::to_string(t.line) + " (" +
                      csv_strerror(csv_error(&parser)) + ")");
  }
  if (t.error.empty() && csv_fini(&parser, TableReader::on_field, TableReader::on_row, &t) != 0) {
    // Strict, the end fails only inside a quoted field: the field after those of the row so far.
    const std::size_t field = t.row.size();
    const std::string column = field < t.table.header.size()
                                   ? "column '" + t.table.header[field] + "'"
                                   : "field " + std::to_string(field + 1);
    throw DataError("'" + file + "': row " + std::to_string(t.line + 1) + ", " + column +
                    ": a quote is opened and never closed (the rest of the file reads as inside "
                    "it; " +
                    csv_strerror(csv_error(&parser)) + ")");
  }
  if (!t.error.empty()) throw DataError("'" + file + "': " + t.error);
  if (t.table.header.empty()) throw DataError("'" + file + "': empty (a CSV needs a header row)");
  return std::move(t.table);
}

}  // namespace tandem::data
