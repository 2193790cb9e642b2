// A CSV file read whole as text: a header row and rows of fields, through libcsv (RFC 4180:
// quoted fields, "" inside quotes, CRLF or LF). Used by the "csv" dataset and the images
// dataset's file lists. Stateless; any thread.
#pragma once

#include <string>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::data {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // rows[k] is the file's row k + 2
};

/// Reads `file` split at `delimiter`. Throws DataError naming the file and the row for a file
/// that is missing or not regular, bad quoting, a row with another number of fields than the
/// header, or no header.
CsvTable read_csv_table(const std::string& file, char delimiter);

}  // namespace tandem::data

TANDEM_INTERNAL_API_END
