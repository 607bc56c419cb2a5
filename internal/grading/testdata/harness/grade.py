"""Grade cases with the SWE-bench harness's own grading code (TestGradeMatchesHarness).

usage: grade.py HARNESS_DIR < cases.json > verdicts.json

HARNESS_DIR holds the swebench package (pip install --no-deps --target). Its
package __init__ imports the whole harness (docker, datasets, ...); grading
needs only the constants, the Python log parsers and infra_failure, so the
parent packages are registered empty and the parsers' registry is filled
from the Python parsers alone. Each case is {"status_map", "f2p", "p2p",
"f2f", "p2f", "eval_type", "calculate_to_fail"}; each verdict is the
harness's tests report and resolution status.
"""

import importlib
import json
import sys
import types

root = sys.argv[1] + "/swebench"
for name, path in (
    ("swebench", root),
    ("swebench.harness", root + "/harness"),
    ("swebench.harness.log_parsers", root + "/harness/log_parsers"),
):
    pkg = types.ModuleType(name)
    pkg.__path__ = [path]
    sys.modules[name] = pkg
typing_only = types.ModuleType("swebench.types")
typing_only.TestSpec = object
sys.modules["swebench.types"] = typing_only
parsers = importlib.import_module("swebench.harness.log_parsers.python")
sys.modules["swebench.harness.log_parsers"].PARSER_REGISTRY = {
    n: getattr(parsers, n) for n in dir(parsers) if n.startswith("parse_log_")
}
grading = importlib.import_module("swebench.harness.grading")
c = importlib.import_module("swebench.harness.constants")

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
