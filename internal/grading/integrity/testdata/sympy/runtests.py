"""A small stand-in for SymPy's test runner (sympy/testing/runtests.py):
bin/test collects the test_*.py files under the package whose path holds
an argument, executes each file's source into a dictionary of its own and
runs the module-level test_* functions the file defines, in the order of
their lines, printing what SymPy's runner prints with --verbose: the
file's name, one line per test ("test_x ok", "test_x F", "test_x E"), the
file's last one followed by [OK] or [FAIL], and a banner per failure."""

import inspect
import os
import sys
import traceback


class Reporter:
    def __init__(self):
        self.failed = []
        self.passed = 0

    def entering_filename(self, rel, n):
        sys.stdout.write("%s[%d] " % (rel, n))

    def entering_test(self, f):
        self.active = f
        sys.stdout.write("\n" + f.__name__ + " ")

    def test_pass(self):
        self.passed += 1
        sys.stdout.write("ok")

    def test_fail(self, exc_info):
        self.failed.append((self.rel, self.active, exc_info))
        sys.stdout.write("F")

    def test_exception(self, exc_info):
        self.failed.append((self.rel, self.active, exc_info))
        sys.stdout.write("E")

    def leaving_filename(self, ok):
        sys.stdout.write("%40s\n" % ("[OK]" if ok else "[FAIL]"))

    def finish(self):
        for rel, f, exc_info in self.failed:
            print("_" * 20 + " %s:%s " % (rel, f.__name__) + "_" * 20)
            traceback.print_exception(*exc_info)
        print("tests finished: %d passed, %d failed" % (self.passed, len(self.failed)))
        return not self.failed


def test_file(reporter, root, filename):
    gl = {"__file__": filename}
    with open(filename) as fh:
        exec(compile(fh.read(), filename, "exec"), gl)
    funcs = [v for k, v in gl.items() if k.startswith("test_") and inspect.isfunction(v) and inspect.getsourcefile(v) == filename]
    funcs.sort(key=lambda f: inspect.getsourcelines(f)[1])
    if not funcs:
        return
    reporter.rel = os.path.relpath(filename, root)
    reporter.entering_filename(reporter.rel, len(funcs))
    before = len(reporter.failed)
    for f in funcs:
        reporter.entering_test(f)
        try:
            f()
        except AssertionError:
            reporter.test_fail(sys.exc_info())
        except Exception:
            reporter.test_exception(sys.exc_info())
        else:
            reporter.test_pass()
    reporter.leaving_filename(len(reporter.failed) == before)


def test(*paths, package="."):
    root = os.getcwd()
    files = []
    for d, _, names in os.walk(os.path.join(root, package)):
        files += [os.path.join(d, n) for n in names if n.startswith("test_") and n.endswith(".py")]
    files = sorted(f for f in files if not paths or any(p in f for p in paths))
    reporter = Reporter()
    for f in files:
        test_file(reporter, root, f)
    return reporter.finish()
