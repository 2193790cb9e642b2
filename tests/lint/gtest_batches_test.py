"""scripts/gtest-batches on a hand-written ctest tree of fake GoogleTest executables: every test
ctest selects runs exactly once, in the number of processes asked for, in its working directory
and environment; a failed test, a process that stops early and a batch past its timeout fail the
run with the log shown; garbage arguments and tests that are not GoogleTest tests are refused.

usage: gtest_batches_test.py <scripts/gtest-batches>
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPT = None

# Behaves as a GoogleTest executable: runs the tests GTEST_FILTER names, notes each in ran.txt
# with its process id and working directory, and prints gtest's summary lines. A test whose name
# says Fail fails, Skip skips, Vanish ends the process at once with status 0, Sleep sleeps 5 s.
FAKE_GTEST = textwrap.dedent("""\
    #!/usr/bin/python3
    import os, sys, time
    names = os.environ["GTEST_FILTER"].split(":")
    passed, skipped, failed = [], [], []
    for name in names:
        with open(os.environ["RAN"], "a") as ran:
            ran.write(f"{name} {os.getpid()} {os.getcwd()} {os.environ.get('EXTRA', '-')}\\n")
        if "Vanish" in name:
            sys.exit(0)
        if "Sleep" in name:
            time.sleep(5)
        (failed if "Fail" in name else skipped if "Skip" in name else passed).append(name)
    print(f"[==========] {len(names)} tests ran.")
    print(f"[  PASSED  ] {len(passed)} tests.")
    if skipped:
        print(f"[  SKIPPED ] {len(skipped)} tests.")
    for name in failed:
        print(f"[  FAILED  ] {name}")
    sys.exit(1 if failed else 0)
    """)


class GtestBatches(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        self.ran_file = self.dir / "ran.txt"
        self.lines = []

    def fake(self, name):
        path = self.dir / name
        path.write_text(FAKE_GTEST)
        path.chmod(0o755)
        return path

    # A test as gtest_discover_tests registers it: the executable, --gtest_filter naming the test
    # and --gtest_also_run_disabled_tests (an argument the script passes on to each batch).
    def add(self, exe, name, label, timeout=300, env=None, gtest=True, cwd=None):
        filter_arg = f' "--gtest_filter={name}"' if gtest else ""
        self.lines.append(f'add_test({name} "{exe}"{filter_arg} "--gtest_also_run_disabled_tests")')
        props = f'LABELS "{label}" TIMEOUT "{timeout}" WORKING_DIRECTORY "{cwd or self.dir}"'
        if env:
            props += f' ENVIRONMENT "{env}"'
        self.lines.append(f"set_tests_properties({name} PROPERTIES {props})")

    def run_batches(self, *args):
        (self.dir / "CTestTestfile.cmake").write_text("\n".join(self.lines) + "\n")
        env = dict(os.environ, RAN=str(self.ran_file))
        return subprocess.run([SCRIPT, str(self.dir), *args], capture_output=True, text=True,
                              env=env, timeout=120)

    def ran(self):
        if not self.ran_file.exists():
            return []
        return [line.split() for line in self.ran_file.read_text().splitlines()]

    def test_every_selected_test_runs_once_in_the_batches_asked_for(self):
        a, b, c = self.fake("a_tests"), self.fake("b_tests"), self.fake("c_tests")
        other = self.dir / "elsewhere"
        other.mkdir()
        for i in range(10):
            self.add(a, f"A.t{i}", "unit")
        for i in range(3):
            self.add(b, f"B.t{i}", "e2e", env="EXTRA=yes", cwd=other)
        self.add(b, "B.Skipped", "e2e", env="EXTRA=yes", cwd=other)
        self.add(a, "A.Excluded", "unit")
        self.add(c, "C.OtherLabel", "gui")
        done = self.run_batches("2", "-L", "unit|e2e", "-E", "^A\\.Excluded$")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        rows = self.ran()
        names = sorted(r[0] for r in rows)
        self.assertEqual(names, sorted([f"A.t{i}" for i in range(10)] +
                                       [f"B.t{i}" for i in range(3)] + ["B.Skipped"]))
        self.assertEqual(len({r[1] for r in rows if r[0].startswith("A.")}), 2)
        self.assertEqual(len({r[1] for r in rows if r[0].startswith("B.")}), 2)
        for r in rows:
            if r[0].startswith("B."):
                self.assertEqual((r[2], r[3]), (str(other), "yes"), r)
            else:
                self.assertEqual((r[2], r[3]), (str(self.dir), "-"), r)
        self.assertIn("14 tests in 2 executables, 0 failed batches", done.stdout)
        self.assertIn("1 skipped", done.stdout)

    def test_a_failed_test_fails_the_run_and_shows_its_log_after_every_batch_ran(self):
        a = self.fake("a_tests")
        for name in ["A.one", "A.Fails", "A.two", "A.three"]:
            self.add(a, name, "unit")
        done = self.run_batches("2")
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("[  FAILED  ] A.Fails", done.stderr)
        self.assertEqual(len(self.ran()), 4)
        self.assertIn("1 failed batches", done.stdout)

    def test_a_process_that_stops_early_with_status_zero_fails(self):
        a = self.fake("a_tests")
        for name in ["A.Vanish", "A.never_reached"]:
            self.add(a, name, "unit")
        done = self.run_batches("1")
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("2 tests, 0 passed, 0 skipped", done.stdout)

    def test_a_batch_past_the_sum_of_its_timeouts_fails(self):
        a = self.fake("a_tests")
        self.add(a, "A.Sleep", "unit", timeout=1)
        done = self.run_batches("1")
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("FAILED (exit timeout)", done.stdout)

    def test_garbage_arguments_and_tests_that_are_not_gtest_tests_are_refused(self):
        a = self.fake("a_tests")
        self.add(a, "A.one", "unit")
        for bad in [[], ["0"], ["-3"], ["many"]]:
            done = self.run_batches(*bad)
            self.assertEqual(done.returncode, 2, (bad, done.stdout, done.stderr))
            self.assertIn("BUILD_DIR", done.stderr)
        self.add(a, "plain_script", "unit", gtest=False)
        done = self.run_batches("1")
        self.assertEqual(done.returncode, 2, done.stdout)
        self.assertIn("plain_script is not a GoogleTest test", done.stderr)
        self.assertEqual(self.ran(), [])  # refused before anything ran


if __name__ == "__main__":
    SCRIPT = sys.argv.pop(1)
    unittest.main()
