"""Benchmarks of the Python client, msb.ray and the mini-swe-agent backend.

    python clients/python/bench.py --demo demo --msb bin/msb [--json]

``--demo`` is a directory made by ``msb demo --dir`` (dataset, spec, built
cache). Each figure is measured in one run of this script:

- ``client_exec_session``/``client_exec_oneshot``: the client's round trip
  of ``true`` over the unix socket (a session command; a fresh bash), p50/p95;
- ``ray_sandboxes_per_s``: sandboxes created, used (``true``) and closed per
  second through Ray tasks on a one-node Ray, each on its node's daemon;
- ``ray_eval_1_node``/``ray_eval_3_nodes``: ``msb.ray.evaluate`` of the demo's
  gold patches on a Ray test cluster of 1 and of 3 nodes (each node's cache
  seeded with the demo's, so builds are not timed; a Ray worker already up
  on every node), on this one machine: the nodes share its cores;
- ``episode_msb``/``episode_local``/``episode_bubblewrap``: the same
  scripted mini-swe-agent episode (its own agent loop) on ``MsbEnvironment``
  and on mini-swe-agent's ``LocalEnvironment`` and ``BubblewrapEnvironment``
  (when ``bwrap`` is installed) in a checkout of the same commit; wall time
  per step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
# The Ray test clusters are this machine: Ray on loopback only.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import msb  # noqa: E402

FIX = "sed -i 's|^    return s\\[mid\\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py"
IID = "demo__calc-1"


def pct(xs: List[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


def timed(f: Callable[[], Any], n: int) -> List[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return out


def start_daemon(args: argparse.Namespace, work: str) -> subprocess.Popen:
    sock = os.path.join(work, "msb.sock")
    p = subprocess.Popen([args.msb, "serve", "--listen", "unix://" + sock, "--dataset", args.dataset,
                          "--spec", args.spec, "--cache", args.cache, "--state-dir", os.path.join(work, "state"),
                          "--out", os.path.join(work, "out")], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, "serve.log"), "wb"))
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"msb serve did not start: {open(os.path.join(work, 'serve.log')).read()[-2000:]}")
        time.sleep(0.05)
    return p


def bench_client(c: msb.Client, n: int) -> Dict[str, Any]:
    with c.create_sandbox(IID) as sb:
        s = sb.session("bench")
        timed(lambda: s.exec("true"), 50)
        sess = timed(lambda: s.exec("true"), n)
        one = timed(lambda: sb.exec("true"), max(n // 5, 20))
    return {"client_exec_session": {"n": n, "p50_ms": pct(sess, .5) * 1e3, "p95_ms": pct(sess, .95) * 1e3},
            "client_exec_oneshot": {"n": len(one), "p50_ms": pct(one, .5) * 1e3, "p95_ms": pct(one, .95) * 1e3}}


def bench_episode(args: argparse.Namespace, c: msb.Client, work: str, rounds: int) -> Dict[str, Any]:
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.test_models import DeterministicModel

    from msb.minisweagent import MsbEnvironment

    steps = ["grep -n 'return s\\[mid\\]' calc/stats.py", FIX,
             "python3 -m unittest tests.test_stats 2>&1 | tail -1",
             "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"]
    outputs = [{"role": "assistant", "content": a, "extra": {"actions": [{"command": a}]}} for a in steps]
    row = next(json.loads(line) for line in open(args.dataset) if json.loads(line)["instance_id"] == IID)

    def episode(env: Any) -> float:
        agent = DefaultAgent(DeterministicModel(outputs=outputs), env, system_template="s",
                             instance_template="{{task}}", step_limit=10, cost_limit=1e9)
        t = time.perf_counter()
        info = agent.run("fix it")
        dt = time.perf_counter() - t
        assert info["exit_status"] == "Submitted", info
        return dt / len(steps)

    def checkout(name: str) -> str:
        co = os.path.join(work, name)
        subprocess.run(["git", "clone", "-q", row["repo_url"], co], check=True)
        subprocess.run(["git", "-C", co, "checkout", "-q", row["base_commit"]], check=True)
        return co

    per: Dict[str, List[float]] = {"msb": [], "local": [], "bubblewrap": []}
    for i in range(rounds):
        env = MsbEnvironment(client=c, instance_id=IID)
        try:
            per["msb"].append(episode(env))
        finally:
            env.close()
        per["local"].append(episode(LocalEnvironment(cwd=checkout(f"local-{i}"))))
        if shutil.which("bwrap"):
            from minisweagent.environments.extra.bubblewrap import BubblewrapEnvironment
            per["bubblewrap"].append(episode(BubblewrapEnvironment(cwd=checkout(f"bwrap-{i}"))))
    out: Dict[str, Any] = {f"episode_{k}_per_step": {"n": len(v), "p50_ms": pct(v, .5) * 1e3}
                           for k, v in per.items() if v}
    out["episode_steps"] = len(steps)
    return out


def bench_ray(args: argparse.Namespace, work: str, n: int) -> Dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from msb.ray import Daemons, NodeConfig, local_client, node_resources, sandbox_options
    from msb.ray.eval import evaluate

    out: Dict[str, Any] = {}
    node = {"num_cpus": 1, "resources": node_resources(2, io=1), "object_store_memory": 80 << 20,
            "node_ip_address": "127.0.0.1"}
    for nodes in (1, 3):
        c = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
        for _ in range(nodes - 1):
            c.add_node(**node)
        c.wait_for_nodes()
        c.connect(namespace="msb")
        base = os.path.join(work, f"ray{nodes}")
        for n_ in ray.nodes():
            d = os.path.join(base, n_["NodeID"][:16])
            os.makedirs(d)
            subprocess.run(["cp", "-a", args.cache, os.path.join(d, "cache")], check=True)
        ds = Daemons.start(NodeConfig(base_dir=base, msb=args.msb, dataset=args.dataset, spec=args.spec))
        try:
            if nodes == 1:
                @ray.remote(num_cpus=0)
                def churn(k: int) -> int:
                    cl = local_client()
                    for _ in range(k):
                        with cl.create_sandbox(host_base=True) as sb:
                            sb.exec("true")
                    return k
                ray.get([churn.options(**sandbox_options()).remote(2) for _ in range(2)])  # warm
                t = time.perf_counter()
                done = sum(ray.get([churn.options(**sandbox_options()).remote(n // 2) for _ in range(2)]))
                out["ray_sandboxes_per_s"] = {"n": done, "value": done / (time.perf_counter() - t)}
            # Warm: a worker on every node (as a trainer's long-lived cluster has).
            @ray.remote(num_cpus=0)
            def ping() -> str:
                return local_client().health().status
            ray.get([ping.options(**sandbox_options(), scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False))
                     .remote() for nid in ds.infos for _ in range(2)])
            t = time.perf_counter()
            rep = evaluate(ds, dataset=args.dataset, run_id="bench", out=os.path.join(base, "out"), spec=args.spec)
            out[f"ray_eval_{nodes}_node{'s' if nodes > 1 else ''}"] = {
                "instances": len(rep["results"]), "seconds": time.perf_counter() - t,
                "resolved": len(rep["summaries"][0]["resolved_ids"])}
        finally:
            ds.stop()
            ray.shutdown()
            c.shutdown()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", required=True, help="a directory made by msb demo --dir")
    ap.add_argument("--msb", default="bin/msb")
    ap.add_argument("--round-trips", type=int, default=2000)
    ap.add_argument("--sandboxes", type=int, default=100)
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.msb = os.path.abspath(args.msb)
    args.dataset, args.spec, args.cache = (os.path.abspath(os.path.join(args.demo, f))
                                           for f in ("dataset.jsonl", "specs.yaml", "cache"))
    work = tempfile.mkdtemp(prefix="msb-bench-")
    res: Dict[str, Any] = {}
    p = start_daemon(args, work)
    try:
        c = msb.Client("unix://" + os.path.join(work, "msb.sock"))
        res["mode"] = c.health().mode
        res.update(bench_client(c, args.round_trips))
        res.update(bench_episode(args, c, work, args.episodes))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
    res.update(bench_ray(args, work, args.sandboxes))
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        json.dump(res, sys.stdout, indent=2)
        print()
    else:
        for k, v in res.items():
            print(f"{k:28} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
