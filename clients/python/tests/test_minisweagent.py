"""mini-swe-agent (the real package) on msb: its own agent loop with its own
deterministic model solves a demo instance, and msb grades the submission
in a fresh sandbox."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments import get_environment  # noqa: E402
from minisweagent.exceptions import Submitted  # noqa: E402
from minisweagent.models.test_models import DeterministicModel  # noqa: E402

from msb.minisweagent import MsbEnvironment  # noqa: E402

IID = "demo__calc-1"
FIX = "sed -i 's|^    return s\\[mid\\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py"


def _step(command: str) -> dict:
    return {"role": "assistant", "content": f"```bash\n{command}\n```", "extra": {"actions": [{"command": command}]}}


def test_agent_loop_solves_and_msb_grades(daemon, demo, tmp_path):
    env = get_environment({"environment_class": "msb.minisweagent.MsbEnvironment", "instance_id": IID,
                           "address": daemon.address})
    assert isinstance(env, MsbEnvironment)
    model = DeterministicModel(outputs=[
        _step("grep -n 'return s\\[mid\\]' calc/stats.py"),
        _step(FIX),
        _step("python -c 'from calc.stats import median; print(median([4, 1, 3, 2]))'"),
        _step("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"),
    ])
    traj_path = tmp_path / "traj.json"
    agent = DefaultAgent(model, env, system_template="You fix bugs in {{cwd}}.", instance_template="{{task}}",
                         step_limit=10, cost_limit=100, output_path=traj_path)
    try:
        info = agent.run(demo.row(IID)["problem_statement"])
        assert info["exit_status"] == "Submitted", agent.messages[-1]
        patch = info["submission"]
        assert "calc/stats.py" in patch
        # The observations are the sandbox's: the fix ran in /testbed.
        assert any("2.5" in m.get("content", "") for m in agent.messages if m["role"] == "user")
        result = env.evaluate(patch, model="mini-swe-agent")
        assert result.outcome == "resolved" and result.reward == 1.0, result.detail
        # The sandbox's own diff holds the change too (plus what python left, e.g. __pycache__).
        assert "(s[mid - 1] + s[mid]) / 2" in env.diff()
        traj = json.loads(traj_path.read_text())
        assert traj["trajectory_format"] == "mini-swe-agent-1.1"
        assert traj["info"]["config"]["environment_type"] == "msb.minisweagent.MsbEnvironment"
        assert traj["info"]["config"]["environment"]["instance_id"] == IID
        assert "token" not in traj["info"]["config"]["environment"]
    finally:
        env.close()


def test_execute_forms(daemon):
    with MsbEnvironment(instance_id=IID, address=daemon.address, timeout=5) as env:
        v2 = env.execute({"command": "pwd; echo err >&2; exit 2"})
        assert v2 == {"output": "/testbed\nerr\n", "returncode": 2, "exception_info": ""}
        v1 = env.execute("pwd", "/tmp")  # v1: a string, and a cwd
        assert v1["output"] == "/tmp\n" and v1["returncode"] == 0
        t = env.execute({"command": "sleep 10"}, timeout=1)
        assert t["returncode"] == -1 and "timed out" in t["exception_info"]
        assert t["extra"]["exception_type"] == "TimeoutExpired"
        # Not a submission: marker not first, or a non-zero exit.
        assert env.execute({"command": "echo x; echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})["returncode"] == 0
        assert env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; exit 1"})["returncode"] == 1
        with pytest.raises(Submitted) as e:
            env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo the patch"})
        assert e.value.messages[0]["extra"] == {"exit_status": "Submitted", "submission": "the patch\n"}
        tv = env.get_template_vars(extra=1)
        assert tv["cwd"] == "/testbed" and tv["extra"] == 1 and tv["system"] == "Linux" and tv["sandbox_id"]
        assert env.serialize()["info"]["config"]["environment_type"] == "msb.minisweagent.MsbEnvironment"


def test_persistent_session_mode(daemon):
    with MsbEnvironment(instance_id=IID, address=daemon.address, session=True) as env:
        env.execute({"command": "export KEEP=1; cd calc"})
        assert env.execute({"command": "echo $KEEP; pwd"})["output"] == "1\n/testbed/calc\n"
        assert env.execute({"command": "pwd"}, "/tmp")["output"] == "/tmp\n"
