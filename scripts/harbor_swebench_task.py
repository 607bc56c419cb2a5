"""Make the Harbor task of one SWE-bench row with Harbor's own SWE-bench adapter.

    python harbor_swebench_task.py ADAPTER_DIR DATASET INSTANCE_ID OUT_DIR

ADAPTER_DIR is adapters/swebench of a checkout of Harbor's repository (its
adapter.py, utils.py and template/; Harbor's PyPI package does not ship
it). The adapter reads SWE-bench Verified from the Hugging Face hub; here its
load_dataset reads INSTANCE_ID's row of DATASET (a JSONL file of the same
rows) instead, and nothing else of it changes. One row, because the adapter
names the image of every row it loads through the harness's make_test_spec,
which fetches some repositories' requirements files from GitHub (Django's,
Flask's), unreachable from a host that reaches package registries only.
SWEBenchToHarbor.generate_task
writes OUT_DIR/INSTANCE_ID (instruction.md, task.toml, environment/Dockerfile
FROM the harness's image, tests/test.sh and config.json, solution/solve.sh).
Needs the swebench package the adapter imports (scripts/harbor-swebench.sh
installs it). Prints the task's directory.
"""

import json
import sys
from pathlib import Path


def local_dataset(path, instance):
    """A load_dataset that answers the adapter's one call with the row."""

    def load_dataset(name, *args, **kwargs):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        rows = [r for r in rows if r["instance_id"] == instance]
        if not rows:
            sys.exit(f"{instance} is not in {path}")
        return {"test": rows}

    return load_dataset


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    adapter_dir, dataset, instance, out = argv[1:]
    sys.path.insert(0, str(Path(adapter_dir).resolve()))
    import adapter  # Harbor's adapters/swebench/adapter.py

    adapter.load_dataset = local_dataset(dataset, instance)
    conv = adapter.SWEBenchToHarbor(harbor_tasks_root=Path(out))
    print(conv.generate_task(instance, instance, overwrite=True))


if __name__ == "__main__":
    main(sys.argv)
