"""Print the multi-swe-bench harness's scripts for Multi-SWE-bench rows.

Reads a JSON list of {"org", "repo", "number", "sha"} on stdin and writes,
for each, the default instance's {"fix_run": ..., "prepare": ...} (the
fix-run.sh and prepare.sh its image copies in) as a JSON list on stdout.
The package comes from the directory in MSB_TEST_MULTISWE.
"""

import json
import os
import sys

sys.path.insert(0, os.environ["MSB_TEST_MULTISWE"])

from multi_swe_bench.harness.image import Config, Image  # noqa: E402
from multi_swe_bench.harness.instance import Instance  # noqa: E402
from multi_swe_bench.harness.pull_request import Base, PullRequest  # noqa: E402
import multi_swe_bench.harness.repos  # noqa: E402,F401  (registers every instance)


def scripts(row):
    pr = PullRequest(org=row["org"], repo=row["repo"], number=row["number"], state="", title="", body="",
                     base=Base(label="", ref="", sha=row["sha"]), resolved_issues=[],
                     fix_patch="", test_patch="")
    inst = Instance.create(pr, Config(need_clone=False, global_env=None, clear_env=False))
    img = inst.dependency()
    files = {f.name: f.content for f in img.files()} if isinstance(img, Image) else {}
    return {"fix_run": files.get("fix-run.sh", ""), "prepare": files.get("prepare.sh", "")}


json.dump([scripts(r) for r in json.load(sys.stdin)], sys.stdout)
