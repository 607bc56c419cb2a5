"""What the client decides on its own, without a daemon: where the daemon
is, the token, decoding the wire types, errors by code, placement."""

from __future__ import annotations

import os

import pytest

import msb
from msb import errors, types
from msb._transport import Address, default_address, default_socket, default_token
from msb.ray.placement import Placement, Placer


@pytest.mark.parametrize("env,uid,want", [
    ({}, 0, "/run/msb/msb.sock"),
    ({"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, "/run/user/1000/msb.sock"),
    ({}, 1000, "/tmp/msb-1000/msb.sock"),
    ({"XDG_RUNTIME_DIR": "/run/user/1000"}, 0, "/run/msb/msb.sock"),
])
def test_default_socket(env, uid, want):
    assert default_socket(env, uid) == want


@pytest.mark.parametrize("text,want", [
    ("/tmp/x.sock", Address(path="/tmp/x.sock")),
    ("unix:///tmp/x.sock", Address(path="/tmp/x.sock")),
    ("http://127.0.0.1:7777", Address(host="127.0.0.1", port=7777)),
    ("http://localhost:7777/", Address(host="localhost", port=7777)),
    ("https://127.0.0.1:7443", Address(host="127.0.0.1", port=7443, tls=True)),
    ("https://msb.example", Address(host="msb.example", port=443, tls=True)),
    ("https://[::1]:7443/", Address(host="::1", port=7443, tls=True)),
])
def test_address_parse(text, want):
    assert Address.parse(text) == want
    assert default_address({"MSB_SOCKET": text}) == want
    if want.tls:
        assert Address.parse(want.url()) == want


def test_address_parse_rejects():
    with pytest.raises(ValueError, match="want a socket path, unix://PATH, http://HOST:PORT or https://HOST:PORT"):
        Address.parse("ftp://x")


def test_token(tmp_path):
    f = tmp_path / "tok"
    f.write_text("abc\nignored\n")
    assert default_token({"MSB_TOKEN": "t1", "MSB_TOKEN_FILE": str(f)}) == "t1"
    assert default_token({"MSB_TOKEN_FILE": str(f)}) == "abc"
    assert default_token({}) == ""
    c = msb.Client("http://127.0.0.1:1", token_file=str(f))
    assert c._t.token == "abc"


def test_from_json_nested_and_unknown_fields():
    res = types.from_json(types.EvalResult, {
        "instance_id": "a", "model_name_or_path": "m", "outcome": "resolved", "reward": 1,
        "report": {"patch_is_None": False, "resolved": True,
                   "tests_status": {"FAIL_TO_PASS": {"success": ["t1"], "failure": []}}},
        "timings": {"total_ns": 5}, "a_field_from_a_newer_daemon": 1,
    })
    assert res.model == "m" and res.resolved and res.is_verdict and isinstance(res.reward, float)
    assert res.report.tests_status.fail_to_pass.success == ["t1"]
    assert res.report.tests_status.pass_to_pass.success == []
    assert res.timings.total_ns == 5 and res.test_exit_code is None


def test_to_json_leaves_zero_out():
    assert types.to_json(types.Limits(memory_bytes=1 << 20)) == {"memory_bytes": 1 << 20}
    assert types.Prediction("i", "m", None).to_wire() == {"instance_id": "i", "model_name_or_path": "m",
                                                          "model_patch": None}


@pytest.mark.parametrize("status,code,cls", [
    (400, "bad_request", errors.BadRequest), (400, "path_escape", errors.PathEscape),
    (401, "unauthorized", errors.Unauthorized), (404, "not_found", errors.NotFound),
    (409, "conflict", errors.Conflict), (409, "session_ended", errors.SessionEnded),
    (409, "no_instance", errors.NoInstance), (410, "sandbox_gone", errors.SandboxGone),
    (413, "body_too_large", errors.BodyTooLarge), (429, "quota_exceeded", errors.QuotaExceeded),
    (500, "internal", errors.InternalError), (503, "unavailable", errors.Unavailable),
    (507, "insufficient_storage", errors.InsufficientStorage),
    (409, "a_code_from_a_newer_daemon", errors.Conflict),
])
def test_errors_by_code(status, code, cls):
    e = errors.from_response(status, {"error": {"code": code, "message": "m", "request_id": "r"}}, retry_after=2)
    assert type(e) is cls and e.code == code and e.status == status and e.request_id == "r"
    assert isinstance(e, errors.APIError) and isinstance(e, errors.MsbError)
    assert e.retry_after == 2 and "m" in str(e)


def test_errors_without_api_body():
    e = errors.from_response(502, "<html>bad gateway</html>")
    assert type(e) is errors.APIError and "502" in str(e)
    assert type(errors.from_response(404, "")) is errors.NotFound


def test_placer_prefers_holders_then_pulls_then_waits_for_builds():
    p = Placer({"a": 1, "b": 2, "c": 2})
    refs = ["env/1", "repo/x@1"]
    # Nobody has the layers: the freest node builds them (ties by id).
    first = p.place(refs)
    assert first == Placement(node="b", build=refs)
    p.take(first)
    # Being built on b: no other node builds them too; wait for b.
    assert p.place(refs) is None
    p.release("b", refs, ok=True)  # b built them
    assert p.place(refs) == Placement(node="b")  # a holder with room wins
    p.take(Placement(node="b"))
    p.take(Placement(node="b"))
    # b is full: the freest node pulls from b instead of building.
    assert p.place(refs) == Placement(node="c", source="b", pull=refs)
    # Only what is missing is pulled.
    p.learn("c", ["repo/x@1"])
    assert p.place(refs) == Placement(node="c", source="b", pull=["env/1"])


def test_placer_queues_behind_its_own_build():
    p = Placer({"b": 3})
    p.take(p.place(["env/1"]))
    assert p.place(["env/1"]) == Placement(node="b")


def test_placer_forgets_dead_builders():
    p = Placer({"a": 1, "b": 1})
    pl = p.place(["env/1"])
    p.take(pl)
    assert p.place(["env/1"]) is None
    p.remove(pl.node)
    assert p.place(["env/1"]).build == ["env/1"]


def test_placer_full_cluster_waits():
    p = Placer({"a": 1})
    p.take(p.place([]))
    assert p.place([]) is None
    p.release("a", [], ok=True)
    assert p.place([]) == Placement(node="a")


def test_request_timeout_sync_and_async(tmp_path):
    """A daemon that accepts and never answers: the client's wait ends in
    RequestTimeout (sync and asyncio), not a hang."""
    import asyncio
    import socket

    from msb._transport import AsyncTransport, Call, SyncTransport

    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)
    try:
        call = Call("GET", "/v1/health", lambda s, h, b: b, timeout=0.2)
        with pytest.raises(errors.RequestTimeout):
            SyncTransport(Address(path=path)).run(call)
        with pytest.raises(errors.RequestTimeout):
            asyncio.run(AsyncTransport(Address(path=path)).run(call))
    finally:
        srv.close()


class _Stalled:
    """A loopback TCP server that accepts and never answers; it closes what
    it accepted after ``hold`` seconds (so a client without a bound of its
    own fails then instead of hanging the suite) or when stopped."""

    def __init__(self, hold: float = 60.0) -> None:
        import socket
        import threading

        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.stop = threading.Event()
        self.conns: list = []
        self.thread = threading.Thread(target=self._serve, args=(hold,), daemon=True)
        self.thread.start()

    def _serve(self, hold: float) -> None:
        self.srv.settimeout(0.05)
        import time
        deadline = time.monotonic() + hold
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                self.conns.append(self.srv.accept()[0])
            except OSError:
                pass
        for c in self.conns:
            c.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.srv.close()


def test_create_and_evaluate_time_out_on_a_stalled_daemon():
    """create_sandbox, evaluate, gym_reset and gym_submit are bounded by the
    client's create_timeout / evaluate_timeout, sync and asyncio."""
    import asyncio

    import msb.aio

    srv = _Stalled()
    url = f"http://127.0.0.1:{srv.port}"
    try:
        c = msb.Client(url, token="t", create_timeout=0.2, evaluate_timeout=0.2)
        with pytest.raises(msb.RequestTimeout):
            c.create_sandbox("demo__calc-1")
        with pytest.raises(msb.RequestTimeout):
            c.gym_reset("demo__calc-1")
        with pytest.raises(msb.RequestTimeout):
            msb.Sandbox(c, types.SandboxInfo(id="sb-1")).evaluate()
        with pytest.raises(msb.RequestTimeout):
            c.gym_submit("sb-1")

        async def aio() -> None:
            async with msb.aio.Client(url, token="t", create_timeout=0.2, evaluate_timeout=0.2) as a:
                with pytest.raises(msb.RequestTimeout):
                    await a.create_sandbox("demo__calc-1")
                with pytest.raises(msb.RequestTimeout):
                    await msb.aio.Sandbox(a, types.SandboxInfo(id="sb-1")).evaluate()
                with pytest.raises(msb.RequestTimeout):
                    await a.gym_submit("sb-1")
        asyncio.run(aio())
    finally:
        srv.close()


def test_default_timeouts_are_bounded():
    c = msb.Client("http://127.0.0.1:9", token="t")
    assert 0 < c.create_timeout < float("inf") and 0 < c.evaluate_timeout < float("inf")


def test_ray_paths_are_made_absolute(tmp_path, monkeypatch):
    """What the Ray driver sends to daemons and workers names files, not
    paths relative to wherever those run."""
    from msb.ray import NodeConfig
    from msb.ray.eval import ClusterRun

    monkeypatch.chdir(tmp_path)
    cfg = NodeConfig(base_dir="nodes", msb="bin/msb", dataset="demo/dataset.jsonl", spec="demo/specs.yaml")
    assert (cfg.base_dir, cfg.msb, cfg.dataset, cfg.spec, cfg.cache_dir) == (
        str(tmp_path / "nodes"), str(tmp_path / "bin/msb"), str(tmp_path / "demo/dataset.jsonl"),
        str(tmp_path / "demo/specs.yaml"), "")
    assert NodeConfig(base_dir="/abs", msb="msb").msb == "msb"  # a bare name: each node's PATH
    run = ClusterRun(None, "demo/dataset.jsonl", "r", "logs/run_evaluation", predictions="preds.jsonl")
    assert (run.dataset, run.out, run.predictions, run.spec) == (
        str(tmp_path / "demo/dataset.jsonl"), str(tmp_path / "logs/run_evaluation"), str(tmp_path / "preds.jsonl"), "")
    assert ClusterRun(None, "d", "r", "o").predictions == "gold"


def test_ray_report_tables():
    from msb.ray.__main__ import report_text

    ev = report_text("eval", {"summaries": [{"model_name_or_path": "gold", "total_instances": 4,
                                             "resolved_instances": 3, "unresolved_instances": 1}],
                              "files": {"summary": "/o/r/gold.r.json"}})
    lines = ev.splitlines()
    assert lines[0].split()[:4] == ["model", "instances", "resolved", "unresolved"]
    assert lines[1].split() == ["gold", "4", "3", "1", "0", "0", "0"]
    assert lines[-1] == "summary: /o/r/gold.r.json"
    va = report_text("validate", {"validations": [{}, {}], "valid": ["a"], "invalid": {"b": "gold fails"}})
    assert va.splitlines()[1].split() == ["2", "1", "1", "0"] and va.splitlines()[-1].split() == ["b", "gold", "fails"]


def test_default_socket_dir_of_another_user_is_refused():
    # /tmp/msb-<uid> made first by someone else (here: mode 0777, or not
    # the uid's) is refused, naming it; the uid's own 0700 is accepted.
    from msb._transport import check_private_dir
    uid = 2**31 - 77
    d = f"/tmp/msb-{uid}"
    os.mkdir(d)
    try:
        os.chmod(d, 0o777)
        with pytest.raises(ValueError, match=d):
            check_private_dir(d, uid)
        os.chmod(d, 0o700)
        if os.geteuid() == 0:
            with pytest.raises(ValueError, match=d):
                check_private_dir(d, uid)  # mode 0700 but root's
            os.chown(d, uid, -1)
            check_private_dir(d, uid)
    finally:
        os.rmdir(d)
