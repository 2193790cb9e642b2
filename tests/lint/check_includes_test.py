#!/usr/bin/python3
"""Tests of scripts/check-includes on small fake source trees (so that it cannot pass everything).

Usage: check_includes_test.py <path of scripts/check-includes>   (CTest: lint.check_includes_selftest)
"""

import importlib.machinery
import importlib.util
import io
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                          os.path.join(os.path.dirname(__file__), "../../scripts/check-includes"))


def load_checker():
    loader = importlib.machinery.SourceFileLoader("check_includes", CHECKER)
    spec = importlib.util.spec_from_loader("check_includes", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# A tree that follows the layering: each module includes only those below it, through private
# headers or through the public headers they implement.
CLEAN = {
    "core/include/tandem/error.hpp": "#pragma once\n",
    "core/include/tandem/tensor.hpp": '#pragma once\n#include "tandem/error.hpp"\n',
    "core/include/tandem/callback.hpp": '#pragma once\n#include "tandem/event_sink.hpp"\n',
    "core/include/tandem/event_sink.hpp": "#pragma once\n#include <string>\n",
    "core/src/util/clock.hpp": "#pragma once\n",
    "core/src/util/clock.cpp": '#include "util/clock.hpp"\n#include "tandem/error.hpp"\n',
    "core/src/tensor/tensor.cpp": '#include "tandem/tensor.hpp"\n#include "util/clock.hpp"\n',
    "core/src/parallel/replica.hpp": '#pragma once\n#include "tandem/tensor.hpp"\n',
    "core/src/parallel/loader.cpp": '#include "replica.hpp"\n#include "util/clock.hpp"\n',
    "core/src/cuda/module.cpp": '#include "parallel/replica.hpp"\n',
    "core/src/train/event_sink.cpp": '#include "tandem/event_sink.hpp"\n#include "parallel/replica.hpp"\n',
    "core/app/main.cpp": '#include "train/x.hpp"\n#include "tandem/callback.hpp"\n',
    "core/src/train/x.hpp": "#pragma once\n",
    "plugins/p/p.cpp": '#include "tandem/callback.hpp"\n#include "p/p.hpp"\n',
    "plugins/p/p.hpp": "#pragma once\n",
    "gui/src/window.cpp": '#include "window.hpp"\n#include <QWidget>\n',
    "gui/src/window.hpp": "#pragma once\n",
}


def write_tree(root, files):
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)


class CheckIncludes(unittest.TestCase):
    def run_on(self, extra=None, remove=()):
        with tempfile.TemporaryDirectory() as root:
            files = dict(CLEAN)
            files.update(extra or {})
            for path in remove:
                del files[path]
            write_tree(root, files)
            result = subprocess.run([sys.executable, CHECKER, "--root", root, "--graph"],
                                    capture_output=True, text=True)
            return result.returncode, result.stdout + result.stderr

    def assert_fails_naming(self, extra, *needles):
        code, out = self.run_on(extra)
        self.assertEqual(code, 1, out)
        for needle in needles:
            self.assertIn(needle, out)

    def test_a_clean_tree_passes_and_its_graph_is_printed(self):
        code, out = self.run_on()
        self.assertEqual(code, 0, out)
        self.assertIn("every include follows the layering", out)
        self.assertIn("cuda -> parallel: 1", out)
        self.assertIn("train -> parallel: 1", out)

    def test_a_private_back_edge_fails_naming_file_line_and_edge(self):
        self.assert_fails_naming(
            {"core/src/util/clock.cpp": '#include "util/clock.hpp"\n#include "tensor/t.hpp"\n',
             "core/src/tensor/t.hpp": "#pragma once\n"},
            'core/src/util/clock.cpp:2: util -> tensor: #include "tensor/t.hpp"',
            "util is not above tensor")

    def test_a_back_edge_through_a_public_header_counts_as_its_implementing_module(self):
        # parallel -> train through tandem/event_sink.hpp, which train/event_sink.cpp implements.
        self.assert_fails_naming(
            {"core/src/parallel/loader.cpp": '#include "replica.hpp"\n#include "tandem/event_sink.hpp"\n'},
            'core/src/parallel/loader.cpp:2: parallel -> train: #include "tandem/event_sink.hpp"')

    def test_parallel_may_not_include_the_cuda_module(self):
        self.assert_fails_naming(
            {"core/src/parallel/loader.cpp": '#include "cuda/api.hpp"\n',
             "core/src/cuda/api.hpp": "#pragma once\n"},
            "parallel -> cuda", "core/src/parallel/loader.cpp:1")

    def test_plugins_include_only_public_headers(self):
        self.assert_fails_naming({"plugins/p/p.cpp": '#include "util/clock.hpp"\n'},
                                 "plugins/p/p.cpp:1: plugins -> util", "only public headers")

    def test_the_gui_includes_no_engine_header(self):
        self.assert_fails_naming({"gui/src/window.cpp": '#include "tandem/callback.hpp"\n'},
                                 "gui/src/window.cpp:1: gui -> api", "gui may not include")

    def test_public_headers_never_include_private_ones(self):
        self.assert_fails_naming(
            {"core/include/tandem/tensor.hpp": '#pragma once\n#include "util/clock.hpp"\n'},
            "core/include/tandem/tensor.hpp:2", "a public header includes a private one")

    def test_an_include_that_resolves_nowhere_fails(self):
        self.assert_fails_naming({"core/src/util/clock.cpp": '#include "nowhere/x.hpp"\n'},
                                 'core/src/util/clock.cpp:1: #include "nowhere/x.hpp" does not resolve')

    def test_a_module_missing_from_the_layering_fails(self):
        self.assert_fails_naming({"core/src/mystery/m.cpp": '#include "util/clock.hpp"\n'},
                                 "module 'mystery' is not in the layering")

    def test_exceptions_excuse_exactly_their_include_and_go_stale(self):
        checker = load_checker()
        checker.EXCEPTIONS = [("core/src/util/clock.cpp", "tensor/t.hpp", "util -> tensor: issue 0")]
        back_edge = {"core/src/util/clock.cpp": '#include "util/clock.hpp"\n#include "tensor/t.hpp"\n',
                     "core/src/tensor/t.hpp": "#pragma once\n"}

        def check(files):
            with tempfile.TemporaryDirectory() as root:
                write_tree(root, files)
                out = io.StringIO()
                return checker.check(root, out=out), out.getvalue()

        # The excepted include passes...
        count, out = check({**CLEAN, **back_edge})
        self.assertEqual(count, 0, out)
        # ...but not another back-edge in the same file...
        count, out = check({**CLEAN, **back_edge, "core/src/util/clock.cpp":
                            '#include "tensor/t.hpp"\n#include "tensor/u.hpp"\n',
                            "core/src/tensor/u.hpp": "#pragma once\n"})
        self.assertEqual(count, 1, out)
        self.assertIn('core/src/util/clock.cpp:2: util -> tensor: #include "tensor/u.hpp"', out)
        # ...and once the include is gone the exception is reported as stale.
        count, out = check(CLEAN)
        self.assertEqual(count, 1, out)
        self.assertIn('the exception for #include "tensor/t.hpp" is no longer needed', out)

    def test_the_listed_exceptions_name_an_issue(self):
        for path, name, why in load_checker().EXCEPTIONS:
            self.assertRegex(why, r"issue \d+", f"{path}: {name}")

    def test_a_root_that_is_not_a_source_tree_is_a_usage_error(self):
        with tempfile.TemporaryDirectory() as root:
            result = subprocess.run([sys.executable, CHECKER, "--root", root], capture_output=True, text=True)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)

    def test_the_layering_table_is_acyclic_and_puts_util_at_the_bottom(self):
        allowed = load_checker().closure()
        for module, reach in allowed.items():
            for other in reach - {module}:
                self.assertNotIn(module, allowed[other], f"{module} and {other} include each other")
        self.assertEqual(allowed["util"], {"util"})
        self.assertNotIn("cuda", allowed["parallel"])
        self.assertNotIn("train", allowed["parallel"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
