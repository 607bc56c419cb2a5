"""Answer grading questions with the multi-swe-bench package's own code.

Reads one JSON object on stdin and writes the answers as JSON on stdout:
  {"reports": [{"run": R, "test": R, "fix": R}, ...]}
     -> [{"valid": bool, "p2p": [...], "f2p": [...], "s2p": [...], "n2p": [...]}]
     (R is a recorded run: {"passed_tests": [...], "failed_tests": [...],
     "skipped_tests": [...]}; the report is harness/report.py's Report)
  {"parse": [{"org": O, "repo": N, "logs": [log, ...]}, ...]}
     -> [[{"passed": [...], "failed": [...], "skipped": [...]} or {"error": str}, ...], ...]
     (the repository's default instance's parse_log)
The package comes from the directory in MSB_TEST_MULTISWE.
"""

import json
import os
import sys

sys.path.insert(0, os.environ["MSB_TEST_MULTISWE"])

from multi_swe_bench.harness.image import Config  # noqa: E402
from multi_swe_bench.harness.instance import Instance  # noqa: E402
from multi_swe_bench.harness.pull_request import Base, PullRequest  # noqa: E402
from multi_swe_bench.harness.report import Report  # noqa: E402
from multi_swe_bench.harness.test_result import TestResult  # noqa: E402


def result(r):
    p, f, s = set(r["passed_tests"]), set(r["failed_tests"]), set(r["skipped_tests"])
    return TestResult(len(p), len(f), len(s), p, f, s)


def report(case):
    rep = Report(org="o", repo="r", number=1, run_result=result(case["run"]),
                 test_patch_result=result(case["test"]), fix_patch_result=result(case["fix"]))
    out = {"valid": bool(rep.valid)}
    for kind in ("p2p", "f2p", "s2p", "n2p"):
        out[kind] = sorted(getattr(rep, kind + "_tests")) if rep.valid else []
    return out


def parse(org, repo, logs):
    import multi_swe_bench.harness.repos  # noqa: F401  (registers every instance: slow, so only here)

    pr = PullRequest(org=org, repo=repo, number=1, state="", title="", body="",
                     base=Base(label="", ref="", sha=""), resolved_issues=[],
                     fix_patch="", test_patch="")
    inst = Instance.create(pr, Config(need_clone=False, global_env=None, clear_env=False))
    out = []
    for log in logs:
        try:
            r = inst.parse_log(log)
        except Exception as e:  # the harness fails the report on any exception
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
            continue
        out.append({"passed": sorted(r.passed_tests), "failed": sorted(r.failed_tests),
                    "skipped": sorted(r.skipped_tests)})
    return out


def main():
    q = json.load(sys.stdin)
    if "reports" in q:
        ans = [report(c) for c in q["reports"]]
    else:
        ans = [parse(p["org"], p["repo"], p["logs"]) for p in q["parse"]]
    json.dump(ans, sys.stdout)


main()
