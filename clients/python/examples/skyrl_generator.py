"""A SkyRL-style generator on msb: the agent's environment and the reward.

SkyRL's mini-swe-agent example runs one Ray task per trajectory: the task
makes an environment for the instance, runs mini-swe-agent's loop with the
policy's model, and computes the reward in a second, fresh environment.
This generator does the same on msb:

- each trajectory is a Ray task placed where a daemon has a free sandbox
  slot (``sandbox_options()``; the patch is graded in a fresh sandbox while
  the agent's is still open, in the room each daemon holds back for
  grading beyond its slots); it takes its sandboxes from its OWN node's
  daemon (``local_client()``), so commands never cross nodes;
- the agent runs in ``msb.minisweagent.MsbEnvironment`` (commands in the
  task's /testbed, v1 string actions as SkyRL sends them work too);
- the reward is msb's grade of the patch in a FRESH sandbox with SWE-bench's
  rules (FAIL_TO_PASS and PASS_TO_PASS per test), not the exit code of a
  script run in the agent's own environment.

No LLM runs here: ``ScriptedPolicy`` replays a fixed list of actions per
instance, in place of the policy's generation step. Runnable as is:

    python examples/skyrl_generator.py --dataset demo/dataset.jsonl --spec demo/specs.yaml \\
        --msb bin/msb --base-dir /tmp/msb-skyrl

It starts a one-node Ray (or joins ``--address``), a daemon per node,
generates a trajectory per instance and prints each reward.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
if __name__ == "__main__" and "--address" not in sys.argv:
    # A one-node Ray of our own: on loopback only.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402

from msb.ray import Daemons, NodeConfig, local_client, node_resources, sandbox_options  # noqa: E402

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"


class ScriptedPolicy:
    """Stands in for the policy model: the actions to take per instance
    (here: apply the instance's reference fix, run the tests, submit)."""

    def __init__(self, rows: List[Dict[str, Any]]) -> None:
        self.actions = {r["instance_id"]: self._actions(r) for r in rows}

    @staticmethod
    def _actions(row: Dict[str, Any]) -> List[str]:
        patch = row["patch"].replace("'", "'\\''")
        return ["git status --short", f"printf '%s' '{patch}' | git apply", "python -m unittest -q 2>&1 | tail -1",
                SUBMIT]

    def model_config(self, instance_id: str) -> Dict[str, Any]:
        """mini-swe-agent's DeterministicModel outputs for one instance."""
        return {"outputs": [{"role": "assistant", "content": f"```bash\n{a}\n```",
                             "extra": {"actions": [{"command": a}]}} for a in self.actions[instance_id]]}


@ray.remote(num_cpus=0)
def trajectory(row: Dict[str, Any], model_config: Dict[str, Any], step_limit: int = 20) -> Dict[str, Any]:
    """One trajectory on this node's daemon: agent loop, then the reward."""
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.test_models import DeterministicModel

    from msb.minisweagent import MsbEnvironment

    client = local_client()
    env = MsbEnvironment(client=client, instance_id=row["instance_id"], timeout=120,
                         labels={"generator": "skyrl-example"})
    try:
        agent = DefaultAgent(DeterministicModel(**model_config), env,
                             system_template="You solve issues in the repository at {{cwd}}.",
                             instance_template="{{task}}", step_limit=step_limit, cost_limit=1e9)
        info = agent.run(row["problem_statement"])
        patch = info.get("submission", "")
        # The reward: msb grades the submission in a fresh sandbox.
        result = env.evaluate(patch, model="skyrl-example")
        return {"instance_id": row["instance_id"], "exit_status": info.get("exit_status"),
                "reward": result.reward, "outcome": result.outcome, "steps": agent.n_calls,
                "messages": agent.messages, "node": ray.get_runtime_context().get_node_id(),
                "daemon": client.address.url()}
    finally:
        env.close()


def generate(rows: List[Dict[str, Any]], policy: ScriptedPolicy) -> List[Dict[str, Any]]:
    """A batch of trajectories, one Ray task each (as SkyRL's generator does)."""
    refs = [trajectory.options(**sandbox_options()).remote(r, policy.model_config(r["instance_id"])) for r in rows]
    return ray.get(refs)


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--spec", default="")
    ap.add_argument("--msb", default="msb")
    ap.add_argument("--base-dir", required=True, help="node-local dir for each daemon's cache, state and out")
    ap.add_argument("--address", default="", help="a running Ray cluster (default: start a one-node Ray)")
    ap.add_argument("--cache", default="", help="an existing msb cache for the daemons (one-machine runs)")
    a = ap.parse_args(argv)
    with open(a.dataset) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if a.address:
        ray.init(address=a.address, namespace="msb")
    else:
        ray.init(num_cpus=2, resources=node_resources(4), include_dashboard=False, object_store_memory=80 << 20,
                 namespace="msb")
    daemons = Daemons.start(NodeConfig(base_dir=a.base_dir, msb=a.msb, dataset=a.dataset, spec=a.spec,
                                       cache_dir=a.cache))
    try:
        out = generate(rows, ScriptedPolicy(rows))
    finally:
        daemons.stop()
        ray.shutdown()
    for t in out:
        print(json.dumps({k: t[k] for k in ("instance_id", "exit_status", "outcome", "reward", "steps")}))
    return 0 if all(t["reward"] == 1.0 for t in out) else 1


if __name__ == "__main__":
    sys.exit(main())
