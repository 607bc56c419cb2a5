"""Harbor (the real package, Python >= 3.12) on msb: Harbor's factory loads
``msb.harbor_env:MsbEnvironment`` by import path, with Harbor's own trial
paths and task config, and drives it through BaseEnvironment's methods.

make test runs this file in a second venv (.venv-harbor, Python 3.12 with
clients/python/requirements-harbor.txt); in the main venv, where Harbor
cannot be installed, it is not collected (see conftest.collect_ignore)."""

from __future__ import annotations

from harbor.environments.factory import EnvironmentFactory
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

IID = "demo__calc-1"
FIX = "sed -i 's|^    return s\\[mid\\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py"


async def test_harbor_loads_and_drives_msb(daemon, tmp_path):
    (tmp_path / "env").mkdir()
    env = EnvironmentFactory.create_environment_from_import_path(
        "msb.harbor_env:MsbEnvironment", environment_dir=tmp_path / "env", environment_name="calc",
        session_id="calc__test__env", trial_paths=TrialPaths(tmp_path / "trial"),
        task_env_config=EnvironmentConfig(), instance_id=IID, address=daemon.address)
    assert env.type() == "msb"
    await env.start(force_build=False)
    try:
        sid = env.sandbox_id
        assert daemon.client.get_sandbox(sid).labels["harbor_session"] == "calc__test__env"
        r = await env.exec("pwd; echo err >&2; exit 2")
        assert (r.stdout, r.stderr, r.return_code) == ("/testbed\n", "err\n", 2)
        r = await env.exec("echo $V", env={"V": "x"}, cwd="/tmp")
        assert r.stdout == "x\n" and r.return_code == 0
        (tmp_path / "tests").mkdir()
        (tmp_path / "tests" / "test.sh").write_text("python -m unittest tests.test_stats\n")
        await env.upload_dir(tmp_path / "tests", "/tests")
        await env.upload_file(tmp_path / "tests" / "test.sh", "/tests/copy.sh")
        await env.exec(FIX)
        r = await env.exec("bash /tests/test.sh")
        assert r.return_code == 0, r.stderr
        await env.download_dir("/tests", tmp_path / "back")
        await env.download_file("/testbed/calc/stats.py", tmp_path / "stats.py")
        assert (tmp_path / "back" / "copy.sh").exists() and "s[mid - 1]" in (tmp_path / "stats.py").read_text()
        res = await env.verify()
        assert res.outcome == "resolved"
        assert (await env.exec("cat /logs/verifier/reward.txt")).stdout == "1\n"
    finally:
        await env.stop(delete=True)
    assert daemon.client.get_sandbox(sid).state == "closed"
