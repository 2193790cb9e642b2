#!/usr/bin/python3
"""The hook signatures docs/plugins.md shows compile as overrides (CTest
sdk.docs_hook_signatures): a plugin written from the table must build. Every row of the hook
table whose first cell is a `void on_...(...)` signature (and each `on_...` it names with "same
parameters") becomes an `override` in one class derived from tandem::Callback, compiled with
-fsyntax-only against the public headers. A signature that does not match the header is a
compile error ("marked override, but does not override"), so the test fails.

usage: docs_hook_signatures_test.py DOCS_MD INCLUDE_DIR CXX
"""
import re
import subprocess
import sys
import tempfile


def overrides(markdown):
    rows = [l for l in markdown.splitlines() if l.startswith("| `void on_")]
    out = []
    for row in rows:
        cell = row.split("|")[1]
        first = re.search(r"`(void (on_\w+)\((.*?)\))`", cell)
        if not first:
            continue
        out.append(first.group(1))
        for other in re.findall(r"`(on_\w+)` \(same parameters\)", cell):
            out.append(f"void {other}({first.group(3)})")
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    docs, include, cxx = sys.argv[1:]
    sigs = overrides(open(docs).read())
    if len(sigs) < 15:
        print(f"found {len(sigs)} hook signatures in {docs}, expected every hook (15)")
        return 1
    body = "\n".join(f"  {s} override {{}}" for s in sigs)
    source = f"""#include <cstdint>
#include <string>
#include "tandem/plugin.hpp"
struct FromTheDocs : tandem::Callback {{
  std::string name() const override {{ return "docs"; }}
{body}
}};
int main() {{ FromTheDocs c; (void)c; }}
"""
    with tempfile.NamedTemporaryFile("w", suffix=".cpp") as f:
        f.write(source)
        f.flush()
        r = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Werror=suggest-override",
                            "-I", include, f.name], capture_output=True, text=True)
    if r.returncode != 0:
        print(source)
        print(r.stderr)
        return 1
    print(f"{len(sigs)} hook signatures from {docs} compile as overrides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
