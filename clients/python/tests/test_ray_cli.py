"""``python -m msb.ray`` as docs/ray.md runs it: a driver process of its own
on a one-node Ray cluster, with the guide's relative paths, started from
another directory than the Ray node's (so a path that reaches a daemon or a
worker unresolved fails)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every Ray process on loopback (see test_ray.py)

from ray.cluster_utils import Cluster  # noqa: E402

from msb.ray import node_resources  # noqa: E402

from conftest import msb_bin  # noqa: E402


@pytest.fixture(scope="module")
def one_node():
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": node_resources(2, io=1), "object_store_memory": 80 << 20,
        "node_ip_address": "127.0.0.1", "include_dashboard": False})
    yield c
    c.shutdown()


def _guide(cluster, cwd, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "msb.ray", *args, "--address", cluster.address]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"))


def test_guide_relative(one_node, demo, tmp_path):
    (tmp_path / "demo").symlink_to(demo.dir)
    (tmp_path / "bin").symlink_to(os.path.dirname(msb_bin()))
    ids = [r["instance_id"] for r in demo.rows]
    common = ["--dataset", "demo/dataset.jsonl", "--spec", "demo/specs.yaml", "--out", "logs/run_evaluation",
              "--base-dir", "nodes", "--msb", "bin/msb"]
    p = _guide(one_node, tmp_path, "eval", "--predictions", "gold", "--run-id", "gold", *common)
    assert p.returncode == 0, p.stderr[:3000] + "\n...\n" + p.stderr[-2000:]
    # A table of counts by default, not the report's JSON.
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["model", "instances", "resolved", "unresolved", "empty", "patch", "errors",
                                "infra", "failures"], p.stdout
    assert lines[1].split() == ["gold", str(len(ids)), str(len(ids)), "0", "0", "0", "0"], p.stdout
    assert len(p.stdout) < 2000, p.stdout
    for iid in ids:
        assert (tmp_path / "logs/run_evaluation/gold/gold" / iid / "report.json").is_file()
    assert (tmp_path / "nodes").is_dir()  # the daemons' dirs are the driver's relative --base-dir
    # --json: the whole report (a rerun resumes every result).
    p = _guide(one_node, tmp_path, "eval", "--predictions", "gold", "--run-id", "gold", "--json", *common)
    assert p.returncode == 0, p.stderr[:3000] + "\n...\n" + p.stderr[-2000:]
    rep = json.loads(p.stdout)
    assert sorted(rep["summaries"][0]["resolved_ids"]) == ids and rep["resumed"] == len(ids)
    p = _guide(one_node, tmp_path, "validate", "--run-id", "v1", *common)
    assert p.returncode == 0, p.stderr[:3000] + "\n...\n" + p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["instances", "valid", "invalid", "errored"], p.stdout
    assert lines[1].split() == [str(len(ids)), str(len(ids)), "0", "0"], p.stdout
