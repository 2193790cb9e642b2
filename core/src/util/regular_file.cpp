#include "util/regular_file.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

// Why a file of this type is not a regular file ("" for one); `ec` from asking for it.
std::string type_problem(fs::file_type type, const std::error_code& ec) {
  switch (type) {
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

}  // namespace

std::string not_a_regular_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  return type_problem(status.type(), ec);
}

std::string not_a_replaceable_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_type type = fs::symlink_status(path, ec).type();
  if (type == fs::file_type::not_found || type == fs::file_type::symlink) return "";
  // A path that cannot be looked at (a folder without search permission on the way) is left to
  // the write, whose error says why.
  if (ec) return "";
  return type_problem(type, ec);
}

}  // namespace tandem
