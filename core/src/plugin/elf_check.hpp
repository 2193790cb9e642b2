// The ELF checks a plugin file passes before dlopen: the dynamic loader maps a file's segments
// as its headers say and trusts them, so a truncated .so (a copy cut short, a full disk) makes
// the first touch of a missing page kill the process with SIGBUS inside dlopen — taking down
// `tandem plugins`, `tandem check` and the GUI's plugin list with it. Checked here: the ELF
// identification (64-bit, this machine's byte order and architecture, a shared object) and that
// every program header, loadable segment and the section header table lies inside the file.
// Stateless; any thread.
#pragma once

#include <filesystem>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Why `path` cannot be a loadable shared library for this machine, or "" when its headers are
/// whole. Reads only the headers.
std::string elf_problem(const std::filesystem::path& path);

}  // namespace tandem

TANDEM_INTERNAL_API_END
