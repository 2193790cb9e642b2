#!/usr/bin/python3
"""What libtandem exports (CTest sdk.libtandem_exports_only_tandem): libtandem is built with
hidden visibility (docs/design.md, "The SDK and what libtandem exports"), so its dynamic symbol
table holds Tandem's own declarations and nothing of the libraries it uses inside. Before, it
exported 1,407 symbols, among them nlohmann-json's, fmt's, oneDNN's and Open MPI's C++ bindings',
which a plugin with its own copy of those libraries would have been bound to.

usage: exported_symbols_test.py LIBTANDEM [EXPORTED_SDK_SYMBOL...]
Every defined dynamic symbol must belong to namespace tandem (functions, vtables, type_info,
thunks, guard variables) or be one the C++ runtime makes default-visible whatever the flags (the
standard library's and Boost's template instantiations, their type_info); each name given after
the library must be exported (what the SDK promises plugins). Exit 0 when all holds, 1 otherwise.
"""
import re
import subprocess
import sys

# Namespaces of libraries libtandem uses inside: none of their symbols may leave it.
FORBIDDEN = ("nlohmann::", "fmt::", "spdlog::", "dnnl::", "MPI::", "H5", "CLI::", "Json::",
             "testing::", "omp_", "ompi_")
# What the C++ runtime exports regardless of -fvisibility (namespace std and __gnu_cxx carry
# default visibility attributes in libstdc++'s headers; Boost's exception wrappers likewise).
RUNTIME = ("std::", "__gnu_cxx::", "boost::", "auto std::")
PREFIXES = ("typeinfo for ", "typeinfo name for ", "vtable for ", "VTT for ",
            "construction vtable for ", "guard variable for ", "non-virtual thunk to ",
            "virtual thunk to ")


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", library], check=True,
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] not in ("A",):
            names.append(parts[2])
    return names


def owner(name):
    """The qualified name a symbol belongs to: "tandem::Model::save_weights" for
    "void tandem::Model::save_weights(tandem::CheckpointData&) const" (template arguments, the
    return type and the parameters dropped)."""
    for p in PREFIXES:
        if name.startswith(p):
            name = name[len(p):]
    bare = name
    while True:
        shorter = re.sub(r"<[^<>]*>", "", bare)
        if shorter == bare:
            break
        bare = shorter
    head = bare.split("(", 1)[0].strip()
    return head.split(" ")[-1] if head else bare


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    names = exported(sys.argv[1])
    bad = []
    for n in names:
        qualified = owner(n)
        if qualified.startswith("tandem::"):
            continue
        if qualified.startswith(RUNTIME) and not any(f in qualified for f in FORBIDDEN):
            continue
        if qualified in ("_init", "_fini", "__bss_start", "_edata", "_end"):
            continue
        bad.append(n)
    missing = [s for s in sys.argv[2:] if not any(n.startswith(s) or (" " + s) in n
                                                    for n in names)]
    for n in bad:
        print(f"exported but not Tandem's: {n}")
    for s in missing:
        print(f"not exported, but the SDK declares it: {s}")
    tandem = sum(1 for n in names if "tandem::" in n)
    print(f"{len(names)} exported symbols, {tandem} of them Tandem's")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
