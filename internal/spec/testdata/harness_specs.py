"""Print the SWE-bench harness's Python specs as JSON (TestTableMatchesHarness).

The harness is the swebench package installed in this interpreter. Its
package __init__ imports the whole harness (docker, datasets, ...); the
constants need only the standard library, so the two parent packages are
registered empty and the constants module is imported below them.
"""

import importlib.util
import json
import sys
import types

found = importlib.util.find_spec("swebench")
if found is None or not found.submodule_search_locations:
    sys.exit("swebench is not installed in " + sys.executable)
root = list(found.submodule_search_locations)[0]
for name, path in (("swebench", root), ("swebench.harness", root + "/harness")):
    pkg = types.ModuleType(name)
    pkg.__path__ = [path]
    sys.modules[name] = pkg

import swebench.harness.constants as c  # noqa: E402

from importlib.metadata import version  # noqa: E402

json.dump(
    {
        "version": version("swebench"),
        "specs": c.MAP_REPO_VERSION_TO_SPECS_PY,
        "requirements_paths": c.MAP_REPO_TO_REQS_PATHS,
        "env_yml_paths": c.MAP_REPO_TO_ENV_YML_PATHS,
        "non_test_exts": c.NON_TEST_EXTS,
    },
    sys.stdout,
)
