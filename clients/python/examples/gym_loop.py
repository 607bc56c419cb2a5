"""A custom trainer's loop on msb's gym-style environment.

``MsbEnv.reset(instance_id)`` gives the task; ``step(command)`` returns
``(observation, reward, done, info)``; the reward, once the agent submits,
is msb's grade of its diff in a fresh sandbox. The policy here is
scripted (no LLM runs in this example): it applies the instance's
reference fix, then submits, so every episode earns 1.0.

    MSB_SOCKET=unix:///tmp/msb.sock python examples/gym_loop.py --dataset demo/dataset.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List

import msb
from msb.gym import MsbEnv


def scripted_policy(row: Dict[str, str]) -> List[str]:
    """The actions of one episode (stands in for sampling from a model)."""
    patch = row["patch"].replace("'", "'\\''")
    return ["ls", f"printf '%s' '{patch}' | git apply", f"echo {msb.SUBMIT_MARKER}"]


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="the daemon's dataset (for the scripted policy's patches)")
    a = ap.parse_args(argv)
    with open(a.dataset) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    total = 0.0
    with MsbEnv(max_steps=10) as env:
        for row in rows:
            obs = env.reset(row["instance_id"])
            reward, done, info = 0.0, False, {}
            for action in scripted_policy(row):
                obs, reward, done, info = env.step(action)
                if done:
                    break
            total += reward
            print(json.dumps({"instance_id": row["instance_id"], "reward": reward, "outcome": info.get("outcome"),
                              "steps": info.get("steps")}))
    print(json.dumps({"mean_reward": total / len(rows)}))
    return 0 if total == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
