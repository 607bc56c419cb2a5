"""msb on a real Ray cluster of three nodes on this machine (Ray's own
multi-node test cluster), each node with its own msb daemon and cache dir:
local daemons for rollout workers, placement by cache affinity, layers
pulled from a peer instead of rebuilt, the same harness files as msb eval
on one node, and a node killed in the middle of a batch."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import subprocess
import time
from collections import Counter

import pytest

# Every node of the test cluster is this machine: Ray on loopback only (its
# "no cluster" switch makes every Ray process take 127.0.0.1 as its address).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

import msb  # noqa: E402
from msb.ray import Daemons, NodeConfig, local_client, node_resources, sandbox_options  # noqa: E402
from msb.ray.eval import ClusterRun  # noqa: E402

from conftest import msb_bin  # noqa: E402

SLOTS = 2

SLOW_IMPORT = """diff --git a/calc/__init__.py b/calc/__init__.py
--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -1 +1,3 @@
 \"\"\"Small helpers: statistics, text and calendar.\"\"\"
+import time
+time.sleep(2)
"""


def _node_args() -> dict:
    # Every node on loopback: no traffic to the machine's other addresses.
    return {"num_cpus": 1, "resources": node_resources(SLOTS, io=1), "object_store_memory": 80 << 20,
            "node_ip_address": "127.0.0.1"}


@pytest.fixture(scope="module")
def cluster(tmp_root):
    c = Cluster(initialize_head=True, head_node_args={**_node_args(), "include_dashboard": False})
    workers = [c.add_node(**_node_args()) for _ in range(2)]
    c.wait_for_nodes()
    c.connect(namespace="msb")
    yield c, workers
    ray.shutdown()
    c.shutdown()


def _node_id(node) -> str:
    return node.node_id


@pytest.fixture(scope="module")
def daemons(cluster, demo, tmp_root):
    c, workers = cluster
    base = os.path.join(tmp_root, "nodes")
    # The first worker starts with the demo's cache (every instance's layers);
    # the head and the second worker start empty.
    seeded = _node_id(workers[0])
    os.makedirs(os.path.join(base, seeded[:16]))
    subprocess.run(["cp", "-a", demo.cache, os.path.join(base, seeded[:16], "cache")], check=True)
    ds = Daemons.start(NodeConfig(base_dir=base, msb=msb_bin(), dataset=demo.dataset, spec=demo.spec))
    yield ds
    pids = []
    for h in ds.handles.values():
        try:  # a killed node's actor is gone (Ray may still list the node as alive for a while)
            pids.append(ray.get(h.info.remote(), timeout=10)["pid"])
        except ray.exceptions.RayError:
            pass
    ds.stop()
    for pid in pids:
        assert not _alive(pid), f"msb serve {pid} outlived its node actor"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def _env_builds(info) -> list:
    return glob.glob(os.path.join(info.cache_dir, "logs", "env-*.log"))


def test_rollout_workers_use_their_own_nodes_daemon(daemons, cluster):
    _, workers = cluster
    target = _node_id(workers[1])

    @ray.remote(num_cpus=0)
    def rollout() -> dict:
        c = local_client()
        with c.create_sandbox(host_base=True, labels={"rollout": "1"}) as sb:
            return {"node": ray.get_runtime_context().get_node_id(), "address": c.address.url(),
                    "out": sb.exec("echo from $(hostname)").stdout, "sandbox": sb.id}

    got = ray.get(rollout.options(**sandbox_options(),
                                  scheduling_strategy=NodeAffinitySchedulingStrategy(target, soft=False)).remote())
    assert got["node"] == target and got["address"] == daemons.infos[target].address
    assert got["out"].startswith("from ")
    # The sandbox lived on that node's daemon, nowhere else.
    for nid, info in daemons.infos.items():
        state = msb.Client(info.address).get_sandbox(got["sandbox"]).state if nid == target else None
        if nid == target:
            assert state == "closed"
        else:
            with pytest.raises(msb.NotFound):
                msb.Client(info.address).get_sandbox(got["sandbox"])


def test_supervisor_restarts_a_dead_daemon(daemons, cluster):
    c, _ = cluster
    head = next(nid for nid in daemons.infos if nid == ray.get_runtime_context().get_node_id())
    h = daemons.handles[head]
    before = ray.get(h.info.remote())
    os.kill(before["pid"], 9)
    deadline = time.monotonic() + 60
    while True:
        now = ray.get(h.info.remote())
        if now["restarts"] and now["pid"] != before["pid"]:
            try:
                if msb.Client(now["address"]).list_instances():
                    break  # back, with its instances loaded again
            except msb.MsbError:
                pass
        assert time.monotonic() < deadline, f"not restarted: {now}"
        time.sleep(0.2)
    assert not _alive(before["pid"])


def test_affinity_pull_and_same_files_as_msb_eval(daemons, cluster, demo, tmp_root):
    _, workers = cluster
    seeded = _node_id(workers[0])
    ids = [r["instance_id"] for r in demo.rows]
    for nid in daemons.infos:
        st = daemons.layers(nid, ids[0])
        assert st["present"] == (nid == seeded), (nid, st)
    out = os.path.join(tmp_root, "ray-out")
    run = ClusterRun(daemons, demo.dataset, "r1", out, predictions="gold", spec=demo.spec)
    rep = run.run()
    placed = [(iid, node) for ev, iid, node in run.events if ev == "placed"]
    pulled = [(iid, node) for ev, iid, node in run.events if ev == "pulled"]
    # The seeded node takes as many as it has room for; the rest go to
    # nodes that pulled the layers from it, and nothing was built anywhere.
    assert [n for _, n in placed[:SLOTS]] == [seeded] * SLOTS
    assert pulled and all(node != seeded for _, node in pulled)
    for nid, info in daemons.infos.items():
        assert _env_builds(info) == [] or nid == seeded, f"node {nid} built an environment"
    for iid, node in pulled:
        assert daemons.layers(node, iid)["present"]
    (summary,) = rep["summaries"]
    assert sorted(summary["resolved_ids"]) == ids and rep["resumed"] == len(ids)
    # The same files as msb eval on one node.
    one = os.path.join(tmp_root, "one-node-out")
    p = subprocess.run([msb_bin(), "eval", "--dataset", demo.dataset, "--spec", demo.spec, "--cache", demo.cache,
                        "--predictions", "gold", "--run-id", "r1", "--out", one], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for iid in ids:
        a, b = os.path.join(out, "r1", "gold", iid), os.path.join(one, "r1", "gold", iid)
        assert sorted(os.listdir(a)) == sorted(os.listdir(b))
        for name in ("report.json", "patch.diff", "eval.sh"):
            assert open(os.path.join(a, name)).read() == open(os.path.join(b, name)).read(), (iid, name)
    assert json.load(open(os.path.join(out, "r1", "gold.r1.json"))) == json.load(open(os.path.join(one, "r1", "gold.r1.json")))
    # A rerun is idempotent: everything is kept, nothing placed.
    again = ClusterRun(daemons, demo.dataset, "r1", out, predictions="gold", spec=demo.spec)
    again.run()
    assert {ev for ev, _, _ in again.events} == {"kept"}


def test_validation_over_the_cluster(daemons, demo, tmp_root):
    out = os.path.join(tmp_root, "ray-validate")
    run = ClusterRun(daemons, demo.dataset, "v1", out, kind="validation", spec=demo.spec)
    rep = run.run()
    ids = [r["instance_id"] for r in demo.rows]
    assert sorted(rep["valid"]) == ids and rep["invalid"] == {}
    assert json.load(open(os.path.join(out, "v1", "valid.json"))) == ids
    for iid in ids:
        assert os.path.isfile(os.path.join(out, "v1", "gold", iid, "report.json"))
        assert os.path.isfile(os.path.join(out, "v1", "empty", iid, "report.json"))
    assert len({node for ev, _, node in run.events if ev == "done"}) > 1  # spread over the nodes


def test_fork_snapshot_where_it_is_or_pulled(daemons, cluster):
    """A fork of a named snapshot goes to the node whose cache holds it;
    when that node is full, to the freest other node, which pulls the
    snapshot from it first: its children have the snapshot's state and the
    node lists the snapshot since."""
    _, workers = cluster
    holder = _node_id(workers[1])
    clients = {nid: msb.Client(info.address) for nid, info in daemons.infos.items()}  # one machine here
    src = clients[holder].create_sandbox(host_base=True)
    src.exec("mkdir /data && echo base > /data/state.txt")
    clients[holder].snapshot(src.id, "ray-snap")
    src.close()
    kids = []
    try:
        node, got = daemons.fork_snapshot("ray-snap", SLOTS, labels={"g": "1"})
        kids += [(node, k.id) for k in got]
        assert node == holder and len(got) == SLOTS and all(k.labels == {"g": "1"} for k in got)
        node2, got2 = daemons.fork_snapshot("ray-snap")  # the holder is full now
        kids += [(node2, k.id) for k in got2]
        assert node2 != holder and len(got2) == 1
        assert clients[node2].sandbox(got2[0].id).exec("cat /data/state.txt").stdout == "base\n"
        assert "ray-snap" in [s.name for s in clients[node2].snapshots()]
        with pytest.raises(msb.NotFound):
            daemons.fork_snapshot("ray-nosuch")
    finally:
        for nid, sid in kids:
            clients[nid].close_sandbox(sid)
        for c in clients.values():
            if "ray-snap" in [s.name for s in c.snapshots()]:
                c.delete_snapshot("ray-snap")


def test_node_killed_mid_batch(daemons, cluster, demo, tmp_root, caplog):
    c, workers = cluster
    victim = workers[1]
    vid = _node_id(victim)
    preds = os.path.join(tmp_root, "preds.jsonl")
    ids = [r["instance_id"] for r in demo.rows]
    with open(preds, "w") as f:
        for r in demo.rows:
            # The fix plus two seconds at import: each evaluation lasts long
            # enough to be cut short by the kill.
            patch = r["patch"] + SLOW_IMPORT
            f.write(json.dumps({"instance_id": r["instance_id"], "model_name_or_path": "slow",
                                "model_patch": patch}) + "\n")
    out = os.path.join(tmp_root, "ray-kill")
    killed = []

    def on_event(line: str) -> None:
        if not killed and line.startswith("placed ") and line.endswith(vid[:12]):
            c.remove_node(victim, allow_graceful=False)
            killed.append(line.split()[1])

    run = ClusterRun(daemons, demo.dataset, "k1", out, predictions=preds, spec=demo.spec, progress=on_event)
    with caplog.at_level(logging.WARNING, logger="msb.ray"):
        rep = run.run()
    assert killed, "no work was placed on the victim"
    # Each retry is logged with its cause.
    retries = [r.getMessage() for r in caplog.records if r.name == "msb.ray.eval" and "retrying" in r.getMessage()]
    assert any(killed[0] in m and f"node {vid[:12]} lost" in m for m in retries), retries
    done = Counter(iid for ev, iid, _ in run.events if ev == "done")
    assert done == Counter(ids), run.events  # every instance once: nothing lost, nothing twice
    lost = [iid for ev, iid, node in run.events if ev == "lost"]
    assert killed[0] in lost
    assert all(node != vid for ev, iid, node in run.events if ev == "done")
    (summary,) = rep["summaries"]
    assert sorted(summary["resolved_ids"]) == ids
    for iid in ids:
        assert os.path.isfile(os.path.join(out, "k1", "slow", iid, "report.json"))
    # The victim's daemon died with its node.
    deadline = time.monotonic() + 30
    while _alive(daemons.infos[vid].pid):
        assert time.monotonic() < deadline, "the killed node's daemon is still running"
        time.sleep(0.2)
