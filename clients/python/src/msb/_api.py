"""The routes of /v1 as ``Call`` values, shared by the sync and async clients.

Each function builds one request and says how to read its answer; the
clients only run them. Keeping every path, query and body here means the
two forms cannot drift apart.
"""

from __future__ import annotations

import json

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Type, TypeVar, Union
from urllib.parse import quote, urlencode

from . import errors
from . import types as t
from ._transport import Call, decode_json, json_body

T = TypeVar("T")

Env = Union[Mapping[str, str], Sequence[str], None]


def _q(s: str) -> str:
    return quote(s, safe="")


def _obj(cls: Type[T]) -> Any:
    return lambda status, headers, body: t.from_json(cls, decode_json(body))


def _field(name: str) -> Any:
    return lambda status, headers, body: decode_json(body).get(name)


def _raw(status: int, headers: Mapping[str, str], body: bytes) -> bytes:
    return body


def _none(status: int, headers: Mapping[str, str], body: bytes) -> None:
    return None


def ns(seconds: Optional[float]) -> int:
    """Seconds as the API's integer nanoseconds (None and 0 are 0)."""
    return int(round(seconds * 1e9)) if seconds else 0


def env_list(env: Env) -> List[str]:
    """NAME=value entries from a mapping or a list of entries."""
    if not env:
        return []
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    return list(env)


def _wait(timeout: Optional[float], extra: float = 60.0) -> Optional[float]:
    """How long the client waits for an answer that takes up to timeout."""
    return None if not timeout else timeout + extra


def plus_wait(timeout: Optional[float], admission_wait: Optional[float]) -> Optional[float]:
    """A create's wait: the client's timeout plus the time the daemon may
    spend waiting for room (None waits as long as it takes)."""
    return None if timeout is None else timeout + (admission_wait or 0)


#: seconds the clients wait, by default, for a sandbox's creation (which may
#: build the instance's environment first) and for a grading (the daemon's
#: own test timeout is 30 minutes, plus the fresh sandbox's setup)
CREATE_TIMEOUT = 3600.0
EVALUATE_TIMEOUT = 3600.0


# Daemon ---------------------------------------------------------------------


def health() -> Call:
    return Call("GET", "/v1/health", _obj(t.Health), timeout=30)


# Sandboxes ------------------------------------------------------------------


def create_sandbox(*, instance_id: str = "", instance: Optional[Mapping[str, Any]] = None,
                   layers: Sequence[str] = (), host_base: bool = False, workdir: str = "",
                   env: Env = None, network: str = "", labels: Optional[Mapping[str, str]] = None,
                   limits: Optional[t.Limits] = None, lifetime: Optional[float] = None,
                   idle_timeout: Optional[float] = None, admission_wait: Optional[float] = None,
                   max_output: int = 0, image: str = "", warm: int = 0, timeout: Optional[float] = None) -> Call:
    body: Dict[str, Any] = {
        "instance_id": instance_id, "instance": instance, "layers": list(layers),
        "host_base": host_base, "workdir": workdir, "env": env_list(env), "network": network,
        "labels": dict(labels or {}), "lifetime_ns": ns(lifetime), "idle_timeout_ns": ns(idle_timeout),
        "admission_wait_ns": ns(admission_wait), "max_output": max_output, "image": image, "warm": warm,
    }
    body = {k: v for k, v in body.items() if v}
    body["limits"] = t.to_json(limits or t.Limits())
    # Creating may build the instance's environment first (minutes, once).
    return Call("POST", "/v1/sandboxes", _obj(t.SandboxInfo), body=json_body(body),
                timeout=plus_wait(timeout, admission_wait))


def list_sandboxes(labels: Optional[Mapping[str, str]] = None) -> Call:
    q = urlencode([("label", f"{k}={v}") for k, v in (labels or {}).items()])
    return Call("GET", "/v1/sandboxes" + (f"?{q}" if q else ""),
                lambda s, h, b: [t.from_json(t.SandboxInfo, x) for x in decode_json(b)["sandboxes"]],
                timeout=60)


def get_sandbox(sid: str) -> Call:
    return Call("GET", f"/v1/sandboxes/{_q(sid)}", _obj(t.SandboxInfo), timeout=60)


def delete_sandbox(sid: str) -> Call:
    return Call("DELETE", f"/v1/sandboxes/{_q(sid)}", _obj(t.SandboxInfo), timeout=120)


def exec_body(command: str, *, session: str = "", cwd: str = "", env: Env = None, stdin: str = "",
              timeout: Optional[float] = None, separate_stderr: bool = False,
              max_output: int = 0) -> Dict[str, Any]:
    """The ExecRequest body."""
    body: Dict[str, Any] = {"command": command, "session": session, "cwd": cwd, "env": env_list(env),
                            "stdin": stdin, "timeout_ns": ns(timeout), "separate_stderr": separate_stderr,
                            "max_output": max_output}
    return {k: v for k, v in body.items() if v or k == "command"}


def exec_(sid: str, body: Dict[str, Any]) -> Call:
    timeout = body.get("timeout_ns", 0) / 1e9
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/exec", _obj(t.ExecResult), body=json_body(body),
                timeout=_wait(timeout))


def exec_stream(sid: str, body: Dict[str, Any]) -> Call:
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/exec/stream", _none, body=json_body(body),
                accept="application/x-ndjson", timeout=_wait(body.get("timeout_ns", 0) / 1e9))


def parse_event(line: bytes) -> t.ExecEvent:
    """One NDJSON line of a streaming exec; an ``error`` event raises the
    API's exception."""
    ev = t.from_json(t.ExecEvent, decode_json(line))
    if ev.type == "error":
        info = ev.error or t.ErrorInfo(code="internal", message="stream ended with an error event")
        raise errors.from_response(0, {"error": t.to_json(info, keep_zero=True)})
    return ev


def list_sessions(sid: str) -> Call:
    return Call("GET", f"/v1/sandboxes/{_q(sid)}/sessions", _field("sessions"), timeout=60)


def create_session(sid: str, name: str, *, env: Env = None, cwd: str = "") -> Call:
    body = {k: v for k, v in {"name": name, "env": env_list(env), "dir": cwd}.items() if v}
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/sessions", _field("name"), body=json_body(body),
                timeout=120)


def session_exec(sid: str, name: str, body: Dict[str, Any]) -> Call:
    body = {k: v for k, v in body.items() if k != "session"}
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/sessions/{_q(name)}/exec", _obj(t.ExecResult),
                body=json_body(body), timeout=_wait(body.get("timeout_ns", 0) / 1e9))


def interrupt_session(sid: str, name: str) -> Call:
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/sessions/{_q(name)}/interrupt", _field("interrupted"),
                timeout=60)


def close_session(sid: str, name: str) -> Call:
    return Call("DELETE", f"/v1/sandboxes/{_q(sid)}/sessions/{_q(name)}", _none, timeout=60)


def _files(sid: str, sub: str, **query: Any) -> str:
    q = urlencode({k: v for k, v in query.items() if v not in (None, "")})
    return f"/v1/sandboxes/{_q(sid)}/files{sub}?{q}"


def read_file(sid: str, path: str, max_bytes: int = 0) -> Call:
    return Call("GET", _files(sid, "", path=path, max_bytes=max_bytes or None), _raw,
                accept="application/octet-stream", timeout=300)


def write_file(sid: str, path: str, data: bytes, mode: Optional[int] = None) -> Call:
    return Call("PUT", _files(sid, "", path=path, mode=None if mode is None else f"{mode:04o}"),
                _obj(t.FileWritten), body=data, content_type="application/octet-stream", timeout=300)


def stat(sid: str, path: str) -> Call:
    return Call("GET", _files(sid, "/stat", path=path), _obj(t.FileEntry), timeout=60)


def list_dir(sid: str, path: str) -> Call:
    return Call("GET", _files(sid, "/list", path=path), _obj(t.FileList), timeout=60)


def get_tar(sid: str, path: str) -> Call:
    return Call("GET", _files(sid, "/tar", path=path), _raw, accept="application/x-tar", timeout=600)


def put_tar(sid: str, path: str, data: bytes) -> Call:
    return Call("PUT", _files(sid, "/tar", path=path), _obj(t.FileWritten), body=data,
                content_type="application/x-tar", timeout=600)


def diff(sid: str) -> Call:
    return Call("GET", f"/v1/sandboxes/{_q(sid)}/diff", _field("patch"), timeout=300)


def evaluate(sid: str, patch: Optional[str] = None, model: str = "", artifacts: bool = False,
             timeout: Optional[float] = None, repeat: int = 0) -> Call:
    body: Dict[str, Any] = {}
    if repeat > 1:
        body["repeat"] = repeat
    if patch is not None:
        body["patch"] = patch
    if model:
        body["model_name_or_path"] = model
    if artifacts:
        body["artifacts"] = True
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/evaluate", _obj(t.EvaluateResponse), body=json_body(body),
                timeout=timeout)


# Instances ------------------------------------------------------------------


def load_dataset(path: str, *, instances: Sequence[str] = (), regex: str = "", slice: str = "",
                 skip_bad_rows: bool = False) -> Call:
    body = {"path": path, "instances": list(instances), "regex": regex, "slice": slice,
            "skip_bad_rows": skip_bad_rows}
    return Call("POST", "/v1/datasets", _obj(t.InstancesLoaded),
                body=json_body({k: v for k, v in body.items() if v}))


def add_instances(rows: Iterable[Mapping[str, Any]]) -> Call:
    return Call("POST", "/v1/instances", _obj(t.InstancesLoaded), body=json_body({"rows": list(rows)}))


def list_instances() -> Call:
    return Call("GET", "/v1/instances", _field("instance_ids"), timeout=60)


def get_instance(iid: str) -> Call:
    return Call("GET", f"/v1/instances/{_q(iid)}", _obj(t.InstanceInfo), timeout=60)


def instance_layers(iid: str) -> Call:
    return Call("GET", f"/v1/instances/{_q(iid)}/layers", _obj(t.InstanceLayers), timeout=300)


# Jobs -----------------------------------------------------------------------


def predictions_wire(predictions: Iterable[Union[t.Prediction, Mapping[str, Any]]]) -> List[Dict[str, Any]]:
    """Predictions as the harness's rows (every field present)."""
    out = []
    for p in predictions:
        if isinstance(p, t.Prediction):
            out.append(p.to_wire())
        else:
            out.append({"instance_id": p["instance_id"], "model_name_or_path": p["model_name_or_path"],
                        "model_patch": p.get("model_patch")})
    return out


def submit_job(*, run_id: str, kind: str = "evaluation", instance_ids: Sequence[str] = (),
               predictions: Iterable[Union[t.Prediction, Mapping[str, Any]]] = (), gold: bool = False,
               workers: int = 0, keep_errors: bool = False, repeat: int = 0) -> Call:
    body: Dict[str, Any] = {"kind": kind, "run_id": run_id, "instance_ids": list(instance_ids),
                            "predictions": predictions_wire(predictions), "gold": gold, "workers": workers,
                            "keep_errors": keep_errors, "repeat": repeat if repeat > 1 else 0}
    return Call("POST", "/v1/jobs", _obj(t.Job),
                body=json_body({k: v for k, v in body.items() if v or k in ("kind", "run_id")}), timeout=300)


def reusable(instance_id: str, results: Iterable[Mapping[str, Any]], *, kind: str = "evaluation",
             prediction: Optional[Union[t.Prediction, Mapping[str, Any]]] = None, keep_errors: bool = False,
             repeat: int = 0) -> Call:
    body: Dict[str, Any] = {"kind": kind, "instance_id": instance_id, "results": list(results)}
    if prediction is not None:
        body["prediction"] = predictions_wire([prediction])[0]
    if keep_errors:
        body["keep_errors"] = True
    if repeat:
        body["repeat"] = repeat
    return Call("POST", "/v1/results/reusable", _obj(t.Reuse), body=json_body(body), timeout=60)


def list_jobs() -> Call:
    return Call("GET", "/v1/jobs", lambda s, h, b: [t.from_json(t.Job, j) for j in decode_json(b)["jobs"]],
                timeout=60)


def get_job(jid: str) -> Call:
    return Call("GET", f"/v1/jobs/{_q(jid)}", _obj(t.Job), timeout=60)


def cancel_job(jid: str) -> Call:
    return Call("DELETE", f"/v1/jobs/{_q(jid)}", _obj(t.Job), timeout=120)


# Gym ------------------------------------------------------------------------


def gym_reset(*, instance_id: str = "", instance: Optional[Mapping[str, Any]] = None,
              labels: Optional[Mapping[str, str]] = None, limits: Optional[t.Limits] = None,
              lifetime: Optional[float] = None, idle_timeout: Optional[float] = None,
              admission_wait: Optional[float] = None, timeout: Optional[float] = None) -> Call:
    body: Dict[str, Any] = {"instance_id": instance_id, "instance": instance, "labels": dict(labels or {}),
                            "lifetime_ns": ns(lifetime), "idle_timeout_ns": ns(idle_timeout),
                            "admission_wait_ns": ns(admission_wait)}
    body = {k: v for k, v in body.items() if v}
    body["limits"] = t.to_json(limits or t.Limits())
    return Call("POST", "/v1/gym/reset", _obj(t.GymObservation), body=json_body(body),
                timeout=plus_wait(timeout, admission_wait))


def gym_step(sid: str, command: str, timeout: Optional[float] = None) -> Call:
    body: Dict[str, Any] = {"command": command}
    if timeout:
        body["timeout_ns"] = ns(timeout)
    return Call("POST", f"/v1/gym/{_q(sid)}/step", _obj(t.GymStep), body=json_body(body), timeout=_wait(timeout))


def gym_submit(sid: str, patch: Optional[str] = None, model: str = "", keep: bool = False,
               timeout: Optional[float] = None, repeat: int = 0) -> Call:
    body: Dict[str, Any] = {}
    if repeat > 1:
        body["repeat"] = repeat
    if patch is not None:
        body["patch"] = patch
    if model:
        body["model_name_or_path"] = model
    if keep:
        body["keep"] = True
    return Call("POST", f"/v1/gym/{_q(sid)}/submit", _obj(t.GymSubmitResult), body=json_body(body),
                timeout=timeout)



# Snapshots, forks, rollbacks --------------------------------------------------


def snapshot(sid: str, name: str = "", processes: bool = False) -> Call:
    body = {"name": name} if name else {}
    if processes:
        body["processes"] = "all"
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/snapshot", _obj(t.SnapshotInfo), body=json_body(body), timeout=600)


def list_snapshots() -> Call:
    return Call("GET", "/v1/snapshots",
                lambda s, h, b: [t.from_json(t.SnapshotInfo, x) for x in decode_json(b)["snapshots"]], timeout=60)


def delete_snapshot(name: str) -> Call:
    return Call("DELETE", f"/v1/snapshots/{_q(name)}", _none, timeout=120)


def fork(sid: str, count: int = 1, *, snapshot: str = "", labels: Optional[Mapping[str, str]] = None,
         processes: bool = False, timeout: Optional[float] = None) -> Call:
    body: Dict[str, Any] = {"count": count, "snapshot": snapshot, "labels": dict(labels or {}),
                            "processes": "all" if processes else ""}
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/fork",
                lambda s, h, b: [t.from_json(t.SandboxInfo, x) for x in decode_json(b)["sandboxes"]],
                body=json_body({k: v for k, v in body.items() if v}), timeout=timeout)


def fork_snapshot(name: str, count: int = 1, *, labels: Optional[Mapping[str, str]] = None,
                  warm: int = 0, processes: bool = False, timeout: Optional[float] = None) -> Call:
    body: Dict[str, Any] = {"count": count, "labels": dict(labels or {}), "warm": warm,
                            "processes": "all" if processes else ""}
    return Call("POST", f"/v1/snapshots/{_q(name)}/fork",
                lambda s, h, b: [t.from_json(t.SandboxInfo, x) for x in decode_json(b)["sandboxes"]],
                body=json_body({k: v for k, v in body.items() if v}), timeout=timeout)


def rollback(sid: str, snapshot: str = "") -> Call:
    body = {"snapshot": snapshot} if snapshot else {}
    return Call("POST", f"/v1/sandboxes/{_q(sid)}/rollback", _obj(t.SandboxInfo), body=json_body(body), timeout=600)


def create_sandboxes(count: int, **kw: Any) -> Call:
    """``count`` sandboxes like ``create_sandbox(**kw)``, all or none."""
    if count < 1:
        raise ValueError(f"creating {count} sandboxes: give at least 1")
    call = create_sandbox(**kw)
    body = json.loads(call.body or b"{}")
    body["count"] = count
    call.body = json_body(body)
    call.parse = lambda s, h, b: [t.from_json(t.SandboxInfo, x) for x in decode_json(b)["sandboxes"]]
    return call
