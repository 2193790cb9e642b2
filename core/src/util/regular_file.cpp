#include "util/regular_file.hpp"

namespace tandem {

std::string not_a_regular_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  switch (status.type()) {
    case fs::file_type::regular:
      return "";
    case fs::file_type::not_found:
      return "file not found";
    case fs::file_type::directory:
      return "is a folder, not a file";
    case fs::file_type::fifo:
      return "is a FIFO (a named pipe), not a regular file";
    case fs::file_type::character:
    case fs::file_type::block:
      return "is a device, not a regular file";
    case fs::file_type::socket:
      return "is a socket, not a regular file";
    default:
      return ec ? "cannot be read (" + ec.message() + ")" : "is not a regular file";
  }
}

}  // namespace tandem
