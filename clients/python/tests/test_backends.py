"""The gym, rLLM and Harbor-style backends against a real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import msb
from msb.gym import MsbEnv
from msb.harbor import MsbHarborEnvironment
from msb.rllm import MsbSandbox, SandboxCommandError, WarmPool, create_sandbox

from conftest import msb_bin

IID = "demo__calc-1"
FIX = "sed -i 's|^    return s\\[mid\\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py"


def test_gym_episode_reward_from_grading(client):
    with MsbEnv(client, max_steps=5) as env:
        obs = env.reset(IID)
        assert obs["cwd"] == "/testbed" and "median" in obs["problem_statement"]
        o, r, done, info = env.step("cd calc && ls stats.py")
        assert (r, done) == (0.0, False) and o["output"] == "stats.py\n"
        o, r, done, info = env.step("cd .. && " + FIX)  # the shell persists: cwd was calc
        assert not done
        o, r, done, info = env.step(f"echo {msb.SUBMIT_MARKER}")
        assert done and r == 1.0 and info["outcome"] == "resolved" and not info["truncated"]
        # A new episode that changes nothing: an empty patch, reward 0, after max_steps.
        env.reset(IID)
        for _ in range(4):
            assert env.step("true")[2] is False
        o, r, done, info = env.step("true")
        assert done and r == 0.0 and info["outcome"] == "empty_patch" and info["truncated"]


def test_rllm_sandbox_protocol(client, tmp_path):
    sb = create_sandbox(IID, client=client)
    try:
        assert isinstance(sb, MsbSandbox) and sb.is_alive()
        assert sb.exec("pwd") == "/testbed\n"
        with pytest.raises(SandboxCommandError) as e:
            sb.exec("echo partial; exit 5")
        assert e.value.exit_code == 5 and e.value.output == "partial\n"
        f = tmp_path / "a.txt"
        f.write_text("A")
        sb.upload_file(str(f), "/tmp/in/a.txt")
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "b.txt").write_text("B")
        sb.upload_dir(str(tmp_path / "d"), "/tmp/dir")
        assert sb.exec("cat /tmp/in/a.txt /tmp/dir/b.txt") == "AB"
        sb.exec(FIX)
        assert sb.evaluate().resolved
    finally:
        sb.close()
    assert sb.is_alive() is False  # never raises


def test_rllm_warm_pool(client):
    pool = WarmPool(IID, 2, client=client)
    try:
        a, b = pool.get(timeout=120), pool.get(timeout=120)
        assert a.sandbox.id != b.sandbox.id and a.exec("echo a") == "a\n"
        a.close()
        b.close()
    finally:
        pool.close()
    assert client.list_sandboxes({"harness": "rllm"}) == []


async def test_harbor_style_environment(daemon, tmp_path):
    import msb.aio
    async with msb.aio.Client(daemon.address) as c:
        env = MsbHarborEnvironment(IID, client=c)
        await env.start(force_build=False)
        try:
            r = await env.exec("echo out; echo err >&2; exit 3", cwd="/tmp", env={"Z": "1"})
            assert (r.stdout, r.stderr, r.return_code) == ("out\n", "err\n", 3)
            r = await env.exec("sleep 5", timeout_sec=0.3)
            assert r.return_code == 124
            (tmp_path / "up").mkdir()
            (tmp_path / "up" / "t.sh").write_text("echo t\n")
            await env.upload_dir(tmp_path / "up", "/tests")
            await env.upload_file(tmp_path / "up" / "t.sh", "/tests/t2.sh")
            assert (await env.exec("bash /tests/t.sh; bash /tests/t2.sh")).stdout == "t\nt\n"
            await env.download_file("/tests/t.sh", tmp_path / "down" / "t.sh")
            await env.download_dir("/tests", tmp_path / "downdir")
            assert (tmp_path / "downdir" / "t2.sh").read_text() == "echo t\n"
            await env.exec(FIX, cwd="/testbed")
            res = await env.verify()
            assert res.resolved
            assert (await env.exec("cat /logs/verifier/reward.txt")).stdout == "1\n"
        finally:
            await env.stop(delete=True)


EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def test_gym_example_runs(daemon, demo):
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "gym_loop.py"), "--dataset", demo.dataset],
                       env={**os.environ, "MSB_SOCKET": daemon.listen}, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout.splitlines()[-1]) == {"mean_reward": 1.0}


def test_skyrl_example_runs(demo, tmp_path):
    """The SkyRL-style generator, as its docstring runs it: a one-node Ray,
    a daemon, a trajectory per instance, rewards from msb's grading."""
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "skyrl_generator.py"), "--dataset", demo.dataset,
                        "--spec", demo.spec, "--msb", msb_bin(), "--base-dir", str(tmp_path), "--cache", demo.cache],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert [r["instance_id"] for r in rows] == [r["instance_id"] for r in demo.rows]
    assert all(r["reward"] == 1.0 and r["exit_status"] == "Submitted" for r in rows), rows
