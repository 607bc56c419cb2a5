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


def test_mini_extra_swebench_batch_runner(daemon, demo, tmp_path):
    """mini-swe-agent's own batch runner (``mini-extra swebench``), unchanged,
    with its SWE-bench config plus msb's two lines, on the demo dataset: a
    scripted model fixes demo__calc-1 (a no-op on the others) and submits;
    every instance gets its own sandbox, closed after, and msb grades the
    runner's preds.json."""
    import shutil
    import subprocess
    import sys

    import yaml

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(demo.dataset, data / "dataset.jsonl")
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff -- calc"
    msb_yaml = {
        # What docs/python.md tells a user to add to swebench.yaml:
        "environment": {"environment_class": "msb.minisweagent.MsbEnvironment"},
        "run": {"env_startup_command": "msb-instance {{instance_id}}"},
        # The one scripted part: the model.
        "model": {"model_class": "minisweagent.models.test_models.DeterministicModel",
                  "outputs": [_step("git status --short"), _step(FIX), _step(submit)]},
    }
    (tmp_path / "msb.yaml").write_text(yaml.safe_dump(msb_yaml))
    out = tmp_path / "out"
    env = dict(os.environ, MSB_SOCKET=daemon.listen, MSWEA_SILENT_STARTUP="1",
               MSWEA_GLOBAL_CONFIG_DIR=str(tmp_path / "mswea"), HF_HOME=str(tmp_path / "hf"),
               HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    mini_extra = os.path.join(os.path.dirname(sys.executable), "mini-extra")
    p = subprocess.run([mini_extra, "swebench", "--subset", str(data), "--split", "train", "-o", str(out),
                        "-c", "swebench.yaml", "-c", str(tmp_path / "msb.yaml"), "-w", "2"],
                       env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    log = (out / "minisweagent.log").read_text() if (out / "minisweagent.log").exists() else ""
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:] + log[-3000:]
    ids = [r["instance_id"] for r in demo.rows]
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(preds) == ids, log[-5000:]
    for iid in ids:
        traj = json.loads((out / iid / f"{iid}.traj.json").read_text())
        assert traj["info"]["exit_status"] == "Submitted", (iid, traj["info"], log[-3000:])
        assert traj["info"]["config"]["environment"]["instance_id"] == iid
    assert "(s[mid - 1] + s[mid]) / 2" in preds[IID]["model_patch"]
    # Every sandbox the runner's environments made is closed.
    assert daemon.client.list_sandboxes({"harness": "mini-swe-agent"}) == []
    job = daemon.client.submit_job("mini-extra", predictions=list(preds.values()))
    job = daemon.client.wait_job(job.id, timeout=600)
    (summary,) = job.report.summaries
    assert summary.resolved_ids == [IID], summary
    assert sorted(summary.empty_patch_ids) == [i for i in ids if i != IID], summary


def test_environment_without_instance(daemon):
    """Made from a config without an instance (as the batch runner makes
    it), the environment has no sandbox until ``msb-instance <id>``; other
    environments' keys are ignored, a non-bash interpreter refused."""
    env = MsbEnvironment(address=daemon.address, image="docker.io/x", interpreter=["bash", "-c"])
    try:
        assert env.sandbox is None
        assert "msb-instance" in env.execute({"command": "pwd"})["exception_info"]
        started = env.execute({"command": f"msb-instance {IID}"})
        assert started["returncode"] == 0 and env.sandbox is not None
        assert env.execute({"command": "pwd"})["output"] == "/testbed\n"
        assert env.execute({"command": f"msb-instance {IID}"})["returncode"] == -1
    finally:
        env.close()
    with pytest.raises(ValueError, match="bash"):
        MsbEnvironment(address=daemon.address, instance_id=IID, interpreter=["python", "-c"])
