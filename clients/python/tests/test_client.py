"""The client against a real daemon: every route group, sync and asyncio,
unix socket and TCP with a token."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

import msb
import msb.aio

IID = "demo__calc-1"
FIX = "sed -i 's|^    return s\\[mid\\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py"


def test_health(client):
    h = client.health()
    assert h.status == "ok" and h.mode in ("root", "rootless") and h.version
    assert h.quota.max_body_bytes > 0


def test_instances(client, demo):
    ids = client.list_instances()
    assert ids == [r["instance_id"] for r in demo.rows]
    info = client.get_instance(IID)
    assert info.fail_to_pass == demo.row(IID)["FAIL_TO_PASS"] and info.base_commit == demo.row(IID)["base_commit"]
    assert info.spec["spec_digest"].startswith("sha256:")
    with pytest.raises(msb.NotFound):
        client.get_instance("no-such-instance")


def test_sandbox_lifecycle_and_errors(client):
    sb = client.create_sandbox(IID, labels={"suite": "lifecycle"})
    try:
        assert sb.info.state == "running" and sb.info.instance_id == IID
        assert [s.id for s in client.list_sandboxes({"suite": "lifecycle"})] == [sb.id]
        assert client.list_sandboxes({"suite": "none-such"}) == []
        assert client.get_sandbox(sb.id).labels == {"suite": "lifecycle"}
    finally:
        closed = sb.close()
    assert closed.state == "closed"
    assert client.get_sandbox(sb.id).state == "closed"
    with pytest.raises(msb.SandboxGone):
        sb.exec("true")
    with pytest.raises(msb.NotFound):
        client.get_sandbox("sb-does-not-exist")
    sb.close()  # closing twice is not an error


def test_exec_forms(client):
    with client.create_sandbox(IID) as sb:
        r = sb.exec("pwd; echo out; echo err >&2; exit 3")
        assert r.exit_code == 3 and r.stdout == "/testbed\nout\nerr\n" and r.stderr == "" and not r.ok
        r = sb.exec("echo out; echo err >&2", separate_stderr=True)
        assert (r.stdout, r.stderr) == ("out\n", "err\n")
        r = sb.exec("pwd; echo $A $B; cat", cwd="/tmp", env={"A": "1", "B": "two words"}, stdin="from stdin")
        assert r.stdout == "/tmp\n1 two words\nfrom stdin"
        r = sb.exec("sleep 30", timeout=0.5)
        assert r.timed_out and not r.ok
        big = "x" * (3 << 20)  # past ARG_MAX: the command travels in the body
        r = sb.exec(f"s='{big}'; echo ${{#s}}")
        assert r.stdout.strip() == str(len(big))
        r = sb.exec("head -c 3000000 /dev/zero | tr '\\0' a", max_output=1000)
        assert r.truncated and len(r.stdout) < 3000


def test_exec_stream(client):
    with client.create_sandbox(IID) as sb:
        events = list(sb.exec_stream("for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2; exit 4",
                                     separate_stderr=True))
        assert events[-1].type == "result"
        res = events[-1].result
        assert res.exit_code == 4 and res.stdout == "1\n2\n3\n" and res.stderr == "e\n"
        chunks = [e for e in events[:-1] if e.type == "stdout"]
        assert len(chunks) >= 2, events  # output came as it was written, not at the end
        assert "".join(e.data for e in chunks) == "1\n2\n3\n"
        # The connection is reusable after a stream.
        assert sb.exec("echo again").stdout == "again\n"


def test_sessions(client):
    with client.create_sandbox(IID) as sb:
        s = sb.session("main", env={"X": "1"})
        assert s.exec("cd calc; f() { echo fn$1; }; Y=2").exit_code == 0
        assert s.exec("pwd; f $X$Y").stdout == "/testbed/calc\nfn12\n"
        assert sb.sessions() == ["main"]
        with pytest.raises(msb.Conflict):
            sb.session("main")
        # A timeout interrupts the command and leaves the session usable.
        assert s.exec("sleep 30", timeout=0.3).timed_out
        assert s.exec("echo alive").stdout == "alive\n"
        # An interrupt from another thread ends a running command.
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", s.exec("sleep 60; echo no")))
        t.start()
        deadline = time.monotonic() + 20
        while not s.interrupt():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        t.join(30)
        assert box["r"].timed_out and "no" not in box["r"].stdout
        r = s.exec("exit 7")
        assert r.session_ended
        with pytest.raises((msb.SessionEnded, msb.NotFound)):
            s.exec("true")
        s2 = sb.session("second", cwd="/tmp")
        assert s2.exec("pwd").stdout == "/tmp\n"
        s2.close()
        assert "second" not in sb.sessions()


def test_files(client, tmp_path):
    with client.create_sandbox(IID) as sb:
        w = sb.write_file("/testbed/new/dir/a.txt", b"hello\x00bytes", mode=0o600)
        assert w.bytes == 11
        assert sb.read_file("/testbed/new/dir/a.txt") == b"hello\x00bytes"
        st = sb.stat("/testbed/new/dir/a.txt")
        assert st.type == "file" and st.size == 11 and st.mode & 0o777 == 0o600
        assert [e.name for e in sb.list_dir("/testbed/new/dir")] == ["a.txt"]
        with pytest.raises(msb.NotFound):
            sb.read_file("/testbed/missing")
        sb.exec("ln -s /etc/shadow /testbed/evil")
        with pytest.raises((msb.PathEscape, msb.NotFound, msb.BadRequest)):
            sb.read_file("/../../../../etc/shadow/../" + "x")
        # Directories both ways.
        src = tmp_path / "src"
        (src / "sub").mkdir(parents=True)
        (src / "sub" / "f.py").write_text("print(1)\n")
        (src / "top.txt").write_text("top\n")
        sb.upload(str(src), "/root/tools/bundle")
        assert sb.exec("cat /root/tools/bundle/top.txt /root/tools/bundle/sub/f.py").stdout == "top\nprint(1)\n"
        sb.download("/root/tools/bundle", str(tmp_path / "back"))
        assert (tmp_path / "back" / "sub" / "f.py").read_text() == "print(1)\n"
        sb.download("/testbed/new/dir/a.txt", str(tmp_path / "one" / "a.txt"))
        assert (tmp_path / "one" / "a.txt").read_bytes() == b"hello\x00bytes"


def test_diff_and_evaluate(client, demo):
    with client.create_sandbox(IID) as sb:
        assert sb.diff() == ""
        assert sb.exec(FIX).ok
        patch = sb.diff()
        assert "calc/stats.py" in patch and "(s[mid - 1] + s[mid]) / 2" in patch
        ev = sb.evaluate(model="pytest", artifacts=True)
        res = ev.result
        assert res.outcome == "resolved" and res.reward == 1.0 and res.model == "pytest"
        assert res.report.tests_status.fail_to_pass.success == demo.row(IID)["FAIL_TO_PASS"]
        assert ev.artifacts is not None and ev.artifacts.tests_ran and "calc/stats.py" in ev.artifacts.patch
        # The agent's sandbox is untouched by the evaluation, and an empty
        # patch given explicitly is graded as one.
        assert "stats.py" in sb.exec("git status --short").stdout
        assert sb.evaluate("").result.outcome == "empty_patch"
        assert sb.evaluate(demo.row(IID)["patch"]).result.resolved
    with client.create_sandbox(host_base=True) as raw:
        assert raw.exec("echo hi").stdout == "hi\n"
        with pytest.raises(msb.NoInstance):
            raw.diff()


def test_inline_instance(client, demo):
    row = dict(demo.row("demo__calc-2"), instance_id="inline__calc-2")
    with client.create_sandbox(instance=row) as sb:
        assert sb.info.instance_id == "inline__calc-2"
        assert sb.exec("git log -1 --format=%H").stdout.strip() == row["base_commit"]


def test_jobs(client, daemon, demo):
    preds = [msb.Prediction("demo__calc-1", "m/one", demo.row("demo__calc-1")["patch"]),
             msb.Prediction("demo__calc-2", "m/one", "")]
    job = client.submit_job("pyjobs", predictions=preds, workers=2)
    assert job.kind == "evaluation" and job.total >= 1
    assert job.id in [j.id for j in client.list_jobs()]
    job = client.wait_job(job.id, timeout=300)
    assert job.state == "done", job.error
    (s,) = job.report.summaries
    assert s.resolved_ids == ["demo__calc-1"] and s.empty_patch_ids == ["demo__calc-2"]
    assert job.out_dir == os.path.join(daemon.out, "pyjobs")
    assert os.path.isfile(os.path.join(job.out_dir, "m__one", "demo__calc-1", "report.json"))
    # A rerun resumes.
    again = client.wait_job(client.submit_job("pyjobs", predictions=preds).id, timeout=300)
    assert again.report.resumed >= 1
    with pytest.raises(msb.NotFound, match="nope"):
        client.submit_job("pyjobs", predictions=[msb.Prediction("nope", "m", "x")])


def test_gym_routes(client, demo):
    obs = client.gym_reset(IID)
    assert obs.instance_id == IID and obs.cwd == "/testbed" and "median" in obs.problem_statement
    st = client.gym_step(obs.sandbox_id, FIX)
    assert not st.done and st.observation.exit_code == 0
    st = client.gym_step(obs.sandbox_id, f"echo {msb.SUBMIT_MARKER}")
    assert st.done
    res = client.gym_submit(obs.sandbox_id)
    assert res.reward == 1.0 and res.outcome == "resolved"
    assert client.get_sandbox(obs.sandbox_id).state == "closed"


def test_tcp_token(tcp_daemon):
    c = tcp_daemon.client
    assert c.address.host == "127.0.0.1" and c.health().status == "ok"
    with pytest.raises(msb.Unauthorized):
        msb.Client(tcp_daemon.address, token="wrong").list_sandboxes()
    with pytest.raises(msb.Unauthorized):
        msb.Client(tcp_daemon.address, token="").list_sandboxes()
    with c.create_sandbox(IID) as sb:
        assert sb.exec("echo over tcp").stdout == "over tcp\n"


def test_env_discovery(daemon, monkeypatch):
    monkeypatch.setenv("MSB_SOCKET", daemon.listen)
    assert msb.Client().health().status == "ok"


def test_unreachable(tmp_path):
    with pytest.raises(msb.DaemonUnreachable, match="msb serve"):
        msb.Client(str(tmp_path / "none.sock")).health()


def test_threads_share_a_client(client):
    with client.create_sandbox(IID) as sb:
        outs = []
        ts = [threading.Thread(target=lambda i=i: outs.append(sb.exec(f"echo {i}").stdout)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(outs) == [f"{i}\n" for i in range(8)]


async def test_async_client(daemon, demo):
    async with msb.aio.Client(daemon.address) as c:
        assert (await c.health()).status == "ok"
        async with await c.create_sandbox(IID) as sb:
            rs = await asyncio.gather(*(sb.exec(f"echo {i}; sleep 0.2") for i in range(4)))
            assert [r.stdout for r in rs] == [f"{i}\n" for i in range(4)]
            evs = [ev async for ev in sb.exec_stream("echo a; sleep 0.3; echo b")]
            assert evs[-1].type == "result" and evs[-1].result.stdout == "a\nb\n"
            s = await sb.session("main")
            await s.exec("cd calc")
            assert (await s.exec("pwd")).stdout == "/testbed/calc\n"
            await sb.write_file("/testbed/x.txt", "x")
            assert await sb.read_text("/testbed/x.txt") == "x"
            await sb.exec(FIX)
            assert (await sb.evaluate()).result.resolved
            with pytest.raises(msb.NotFound):
                await c.get_instance("nope")
        with pytest.raises(msb.SandboxGone):
            await sb.exec("true")


def test_calls_survive_a_daemon_restart(tmp_root, demo):
    """A client's next call after the daemon restarted reconnects, sync and
    asyncio, even with several pooled connections all closed by the restart."""
    from conftest import Daemon, _start

    dm = _start(tmp_root, "restart", demo, "unix://" + os.path.join(tmp_root, "restart", "msb.sock"))
    sync = msb.Client(dm.address)

    def restart() -> None:
        nonlocal dm
        assert dm.stop() == 0, dm.log()
        dm = Daemon(dm.dir, dm.listen, demo.cache, demo.spec, [])

    async def both() -> None:
        async with msb.aio.Client(dm.address) as c:
            await asyncio.gather(*(c.health() for _ in range(3)))  # three pooled connections
            assert sync.health().status == "ok"
            await asyncio.to_thread(restart)
            assert (await c.health()).status == "ok"
            assert sync.health().status == "ok"

    try:
        asyncio.run(both())
    finally:
        sync.close()
        assert dm.stop() == 0, dm.log()
