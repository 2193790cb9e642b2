// TANDEM_EXPORT: what libtandem exports to plugins — the plugin SDK, declared in the headers of
// this folder (the only headers installed). libtandem is built with hidden visibility, so every
// other symbol it defines (its private classes, the libraries it uses inside: oneDNN, HDF5,
// spdlog, nlohmann-json's instantiations) stays inside it and cannot clash with a plugin's own.
// A plugin built against this SDK loads into a Tandem with the same plugin ABI (plugin.hpp).
#pragma once

#define TANDEM_EXPORT __attribute__((visibility("default")))
