// Private: where the loaded libtandem lives, for the files installed beside it (plugins, the
// CUDA module) - the installed tree is relocatable because nothing else is assumed.
#pragma once

#include <filesystem>

namespace tandem::detail {

/// The canonical folder of the libtandem this code runs in; empty if it cannot be found.
std::filesystem::path tandem_library_dir();

/// True when that libtandem is the one in its build tree (not an installed copy).
bool running_from_build_tree();

}  // namespace tandem::detail
