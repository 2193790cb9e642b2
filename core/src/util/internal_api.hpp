// Private: the private declarations that in-tree code outside libtandem uses — the `tandem`
// binary, the CUDA module, the tests and the benchmarks — sit between TANDEM_INTERNAL_API_BEGIN
// and TANDEM_INTERNAL_API_END (after the header's includes), so libtandem, built with hidden
// visibility, exports them to those in-tree users. They are not the SDK: their headers are never
// installed and nothing in them is stable from one version to the next. Plugins see only
// core/include/tandem (TANDEM_EXPORT, tandem/export.hpp). What no region covers — a .cpp file's
// own helpers, the instantiations of the libraries libtandem uses inside — stays hidden.
#pragma once

#define TANDEM_INTERNAL_API_BEGIN _Pragma("GCC visibility push(default)")
#define TANDEM_INTERNAL_API_END _Pragma("GCC visibility pop")
