"""The SWE-bench harness's own code, for msb's tests and measurements.

usage: harness.py HARNESS_DIR < cases.json > verdicts.json
       harness.py HARNESS_DIR regrade DATASET OUT_DIR...
       harness.py HARNESS_DIR specs > specs.json
       harness.py HARNESS_DIR parse < logs.json > maps.json
       harness.py HARNESS_DIR suiteran < logs.json > answers.json

HARNESS_DIR holds the swebench package (pip install --no-deps --target), or
is "-" for the one this interpreter imports. Its package __init__ imports
the whole harness (docker, datasets, ...); what is used here needs only the
constants, the Python log parsers and (5.x) infra_failure, so the parent
packages are registered empty and the parsers' registry is filled from the
Python parsers alone.

Cases (package grading's TestGradeMatchesHarness): each case is
{"status_map", "f2p", "p2p", "f2f", "p2f", "eval_type",
"calculate_to_fail"}; each verdict is the harness's tests report and
resolution status.

regrade: every <OUT_DIR>/<gold|empty|model>/<instance>/ that msb eval or msb
validate wrote is graded again from its test_output.txt by the harness's
get_eval_report, and compared with msb's report.json: one line per
disagreement (resolved or the per-test lists), then the count that agree.

parse (package grading's TestParsersMatchHarness): each input is
{"parser", "log"}, the parser named as msb names it (pytest, pytest_options,
pytest_v2, seaborn, matplotlib, django, sympy; and pytest_verbose, which is
SWE-smith's PythonProfile.log_parser, compiled from the source of the
swesmith package this interpreter finds, without its imports); each answer
is the status map the parser makes of the log, read as get_logs_eval reads
a log file (Python's text mode: "\r\n" and a lone "\r" become "\n"), or
{"error": "<exception>"} where the parser raises.

suiteran (package grading's TestSuiteRanMatchesHarness; 5.x): for each log
in a JSON list, whether get_logs_eval's SUITE_RAN finds that tests ran.

specs (package spec's TestTableMatchesHarness): the harness's version, its
Python spec table, requirement and environment file paths and NON_TEST_EXTS.
"""

import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import types

harness_dir = sys.argv[1]
if harness_dir == "-":
    found = importlib.util.find_spec("swebench")
    if found is None or not found.submodule_search_locations:
        sys.exit("swebench is not installed in " + sys.executable)
    harness_dir = os.path.dirname(list(found.submodule_search_locations)[0])
root = harness_dir + "/swebench"
for name, path in (
    ("swebench", root),
    ("swebench.harness", root + "/harness"),
    ("swebench.harness.log_parsers", root + "/harness/log_parsers"),
    ("swebench.harness.test_spec", root + "/harness/test_spec"),
):
    pkg = types.ModuleType(name)
    pkg.__path__ = [path]
    sys.modules[name] = pkg
for name in ("swebench.types", "swebench.harness.test_spec.test_spec"):  # 5.x, 4.x
    typing_only = types.ModuleType(name)
    typing_only.TestSpec = object
    sys.modules[name] = typing_only
c = importlib.import_module("swebench.harness.constants")


def load_grading():
    """The harness's grading module, over its Python parsers alone."""
    global parsers, grading
    parsers = importlib.import_module("swebench.harness.log_parsers.python")
    registry = sys.modules["swebench.harness.log_parsers"]
    registry.PARSER_REGISTRY = {n: getattr(parsers, n) for n in dir(parsers) if n.startswith("parse_log_")}
    registry.MAP_REPO_TO_PARSER = parsers.MAP_REPO_TO_PARSER_PY  # 4.x
    grading = importlib.import_module("swebench.harness.grading")


def specs():
    dist = next(importlib.metadata.distributions(name="swebench", path=[harness_dir]))
    json.dump(
        {
            "version": dist.version,
            "specs": c.MAP_REPO_VERSION_TO_SPECS_PY,
            "requirements_paths": c.MAP_REPO_TO_REQS_PATHS,
            "env_yml_paths": c.MAP_REPO_TO_ENV_YML_PATHS,
            "non_test_exts": c.NON_TEST_EXTS,
        },
        sys.stdout,
    )


def grade_cases():
    out = []
    for case in json.load(sys.stdin):
        lists = {
            c.FAIL_TO_PASS: case["f2p"] or [],
            c.PASS_TO_PASS: case["p2p"] or [],
            c.FAIL_TO_FAIL: case["f2f"] or [],
            c.PASS_TO_FAIL: case["p2f"] or [],
        }
        report = grading.get_eval_tests_report(
            case["status_map"] or {},
            lists,
            calculate_to_fail=case["calculate_to_fail"],
            eval_type=c.EvalType(case["eval_type"]),
        )
        out.append({"tests_status": report, "resolution": grading.get_resolution_status(report)})
    json.dump(out, sys.stdout)


class Spec:
    """What get_eval_report reads of a test spec."""

    def __init__(self, row):
        listed = lambda v: json.loads(v) if isinstance(v, str) else v  # noqa: E731
        self.instance_id, self.repo, self.version = row["instance_id"], row["repo"], row["version"]
        self.FAIL_TO_PASS, self.PASS_TO_PASS = listed(row["FAIL_TO_PASS"]), listed(row["PASS_TO_PASS"])
        self.log_parser = parsers.MAP_REPO_TO_PARSER_PY[row["repo"]].__name__
        self.eval_type = "pass_and_fail"


def regrade(dataset, outs):
    rows = {}
    with open(dataset) as f:
        for line in f:
            row = json.loads(line)
            rows[row["instance_id"]] = row
    n = agree = 0
    for out in outs:
        for kind in sorted(os.listdir(out)):
            for iid in sorted(os.listdir(os.path.join(out, kind)) if os.path.isdir(os.path.join(out, kind)) else []):
                d = os.path.join(out, kind, iid)
                if not os.path.exists(os.path.join(d, "report.json")) or not os.path.exists(os.path.join(d, "test_output.txt")):
                    continue
                with open(os.path.join(d, "report.json")) as f:
                    ours = json.load(f)[iid]
                patch_path = os.path.join(d, "patch.diff")
                patch = open(patch_path).read() if os.path.exists(patch_path) else ""
                pred = {"instance_id": iid, "model_name_or_path": kind, "model_patch": patch}
                theirs = grading.get_eval_report(Spec(rows[iid]), pred, os.path.join(d, "test_output.txt"), True)[iid]
                n += 1
                if theirs["resolved"] == ours["resolved"] and theirs.get("tests_status") == ours.get("tests_status"):
                    agree += 1
                    continue
                print(f"differs: {d}: resolved msb {ours['resolved']}, harness {theirs['resolved']}")
                for k in (c.FAIL_TO_PASS, c.PASS_TO_PASS):
                    for w in ("success", "failure"):
                        a = set(ours.get("tests_status", {}).get(k, {}).get(w, []))
                        b = set(theirs.get("tests_status", {}).get(k, {}).get(w, []))
                        if a != b:
                            print(f"  {k} {w}: msb only {sorted(a - b)[:5]}, harness only {sorted(b - a)[:5]}")
    print(f"{agree} of {n} evaluations agree (resolved and per-test lists) with swebench in {harness_dir}")
    return 0 if agree == n else 1


def swesmith_parser():
    """SWE-smith's PythonProfile.log_parser, from its source alone: the
    module imports docker, ghapi and the rest of SWE-smith, the method only
    re and TestStatus (swebench's, which SWE-smith imports)."""
    import ast
    import re

    found = importlib.util.find_spec("swesmith")
    if found is None or not found.submodule_search_locations:
        sys.exit("swesmith is not installed in " + sys.executable)
    path = os.path.join(list(found.submodule_search_locations)[0], "profiles", "python.py")
    tree = ast.parse(open(path).read(), path)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PythonProfile")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "log_parser")
    scope = {"re": re, "TestStatus": c.TestStatus}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
    return lambda log, _spec: scope["log_parser"](None, log)


def parse_logs():
    out = []
    smith = None
    for case in json.load(sys.stdin):
        if case["parser"] == "pytest_verbose":
            smith = smith or swesmith_parser()
            parse = smith
        else:
            parse = getattr(parsers, "parse_log_" + case["parser"])
        log = case["log"].replace("\r\n", "\n").replace("\r", "\n")
        try:
            out.append({"map": parse(log, None)})
        except Exception as e:  # the harness's own evaluation would stop here
            out.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "cases"
    if mode == "specs":
        specs()
        sys.exit(0)
    load_grading()
    if mode == "regrade":
        sys.exit(regrade(sys.argv[3], sys.argv[4:]))
    if mode == "parse":
        parse_logs()
        sys.exit(0)
    if mode == "suiteran":
        json.dump([bool(grading.SUITE_RAN.search(log)) for log in json.load(sys.stdin)], sys.stdout)
        sys.exit(0)
    grade_cases()
