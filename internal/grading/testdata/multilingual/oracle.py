"""SWE-bench Multilingual's log parsers, as the oracle of msb's Go ports.

usage: oracle.py HARNESS_DIR < logs.json > maps.json

HARNESS_DIR holds the swebench package (pip install --no-deps --target;
make test-venv puts 5.0.2 in .venv-test/swebench-grading). Each input is
{"parser", "log"}: the parser named as msb names it, the function's name
without "parse_log_" (gotest, cargo, maven, jest, ...), found in the
package's log_parsers/<language>.py. Each answer is {"map": {...}} as the
parser makes it of the log read as get_logs_eval reads a log file (text
mode: "\\r\\n" and a lone "\\r" become "\\n"), or {"error": "..."} where the
parser raises. What a parser prints (5.x's Maven and Gradle warnings) is
dropped.

Only the language modules are imported: the package's __init__ files pull
in docker and datasets, so the parent packages are registered empty, the
TestSpec type is a stand-in, and unidiff (imported by swebench.utils for
other functions than ansi_escape) is an empty module.
"""

import contextlib
import importlib
import io
import json
import sys
import types

root = sys.argv[1] + "/swebench"
for name, path in (
    ("swebench", root),
    ("swebench.harness", root + "/harness"),
    ("swebench.harness.log_parsers", root + "/harness/log_parsers"),
    ("swebench.harness.test_spec", root + "/harness/test_spec"),
):
    pkg = types.ModuleType(name)
    pkg.__path__ = [path]
    sys.modules[name] = pkg
for name in ("swebench.types", "swebench.harness.test_spec.test_spec"):
    typing_only = types.ModuleType(name)
    typing_only.TestSpec = object
    sys.modules[name] = typing_only
unidiff = types.ModuleType("unidiff")
unidiff.PatchSet = object
sys.modules["unidiff"] = unidiff

functions = {}
for lang in ("c", "go", "java", "javascript", "php", "ruby", "rust"):
    mod = importlib.import_module("swebench.harness.log_parsers." + lang)
    for attr in dir(mod):
        if attr.startswith("parse_log_"):
            functions[attr[len("parse_log_"):]] = getattr(mod, attr)

answers = []
for item in json.load(sys.stdin):
    log = item["log"].replace("\r\n", "\n").replace("\r", "\n")
    try:
        # 5.x's Maven and Gradle parsers print warnings on stdout
        with contextlib.redirect_stdout(io.StringIO()):
            answers.append({"map": functions[item["parser"]](log, None)})
    except Exception as e:  # the harness's evaluation would stop here
        answers.append({"error": f"{type(e).__name__}: {e}"})
json.dump(answers, sys.stdout)
