"""The asyncio client of msb serve: the same methods as ``msb.Client``, as
coroutines, for rollout workers that run many episodes on one event loop.

>>> import asyncio, msb.aio
>>> async def main():
...     async with msb.aio.Client() as c:
...         async with await c.create_sandbox("demo__calc-1") as sb:
...             r = await sb.exec("python -m pytest -q", timeout=60)
...             async for ev in sb.exec_stream("for i in 1 2 3; do echo $i; sleep 0.1; done"):
...                 print(ev.type, ev.data or ev.result)
>>> asyncio.run(main())

A client belongs to the event loop it was first used on (its connections
are that loop's streams).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, AsyncIterator, Iterable, List, Mapping, Optional, Sequence, Union

from . import _api, _tar
from . import types as t
from ._api import Env
from ._transport import Address, AsyncTransport, resolve_endpoint
from .errors import NotFound, SandboxGone


class Client:
    """An asyncio connection pool to one msb daemon (arguments as ``msb.Client``)."""

    def __init__(self, address: Union[str, Address, None] = None, *, token: Optional[str] = None,
                 token_file: Optional[str] = None, ca_file: Optional[str] = None, max_idle: int = 16,
                 create_timeout: Optional[float] = _api.CREATE_TIMEOUT,
                 evaluate_timeout: Optional[float] = _api.EVALUATE_TIMEOUT) -> None:
        addr, token = resolve_endpoint(address, token, token_file)
        self.address = addr
        self.create_timeout = create_timeout
        self.evaluate_timeout = evaluate_timeout
        self._t = AsyncTransport(addr, token, max_idle=max_idle, ca_file=ca_file)

    async def close(self) -> None:
        """Close the pooled connections (sandboxes stay; close them first)."""
        await self._t.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"msb.aio.Client({self.address.url()!r})"

    async def health(self) -> t.Health:
        """The daemon's status, mode, limits' enforcement and quota."""
        return await self._t.run(_api.health())

    async def create_sandbox(self, instance_id: str = "", *, instance: Optional[Mapping[str, Any]] = None,
                             layers: Sequence[str] = (), host_base: bool = False, workdir: str = "",
                             env: Env = None, network: str = "", labels: Optional[Mapping[str, str]] = None,
                             limits: Optional[t.Limits] = None, lifetime: Optional[float] = None,
                             idle_timeout: Optional[float] = None, admission_wait: Optional[float] = None,
                             max_output: int = 0, image: str = "", warm: int = 0) -> "Sandbox":
        """Create a sandbox (see ``msb.Client.create_sandbox``)."""
        info = await self._t.run(_api.create_sandbox(
            instance_id=instance_id, instance=instance, layers=layers, host_base=host_base, workdir=workdir,
            env=env, network=network, labels=labels, limits=limits, lifetime=lifetime,
            idle_timeout=idle_timeout, admission_wait=admission_wait, max_output=max_output, image=image,
            warm=warm, timeout=self.create_timeout))
        return Sandbox(self, info)

    async def sandbox(self, sandbox_id: str) -> "Sandbox":
        """A handle on an existing sandbox (checked to exist)."""
        return Sandbox(self, await self._t.run(_api.get_sandbox(sandbox_id)))

    async def get_sandbox(self, sandbox_id: str) -> t.SandboxInfo:
        """A sandbox's description, also for one closed or reaped recently."""
        return await self._t.run(_api.get_sandbox(sandbox_id))

    async def list_sandboxes(self, labels: Optional[Mapping[str, str]] = None) -> List[t.SandboxInfo]:
        """Live sandboxes whose labels include every given label."""
        return await self._t.run(_api.list_sandboxes(labels))

    async def close_sandbox(self, sandbox_id: str) -> t.SandboxInfo:
        """Kill everything in a sandbox and remove it."""
        return await self._t.run(_api.delete_sandbox(sandbox_id))

    async def snapshot(self, sandbox_id: str, name: str = "", *, processes: bool = False) -> t.SnapshotInfo:
        """Snapshot a live sandbox (see ``msb.Client.snapshot``)."""
        return await self._t.run(_api.snapshot(sandbox_id, name, processes))

    async def snapshots(self) -> List[t.SnapshotInfo]:
        """The daemon's named snapshots, oldest first."""
        return await self._t.run(_api.list_snapshots())

    async def delete_snapshot(self, name: str) -> None:
        """Drop a named snapshot."""
        await self._t.run(_api.delete_snapshot(name))

    async def fork(self, sandbox_id: str, n: int = 1, *, snapshot: str = "",
                   labels: Optional[Mapping[str, str]] = None, processes: bool = False) -> List["Sandbox"]:
        """``n`` new sandboxes from a live sandbox's state (see ``msb.Client.fork``)."""
        infos = await self._t.run(_api.fork(sandbox_id, n, snapshot=snapshot, labels=labels, processes=processes,
                                            timeout=self.create_timeout))
        return [Sandbox(self, i) for i in infos]

    async def fork_snapshot(self, name: str, n: int = 1, *, labels: Optional[Mapping[str, str]] = None,
                            warm: int = 0, processes: bool = False) -> List["Sandbox"]:
        """``n`` new sandboxes from the named snapshot (see ``msb.Client.fork_snapshot``)."""
        infos = await self._t.run(_api.fork_snapshot(name, n, labels=labels, warm=warm, processes=processes,
                                                     timeout=self.create_timeout))
        return [Sandbox(self, i) for i in infos]

    async def create_sandboxes(self, n: int, instance_id: str = "", **kw: Any) -> List["Sandbox"]:
        """``n`` sandboxes in one call, all or none (see ``msb.Client.create_sandboxes``)."""
        infos = await self._t.run(_api.create_sandboxes(n, instance_id=instance_id, timeout=self.create_timeout, **kw))
        return [Sandbox(self, i) for i in infos]

    async def rollback(self, sandbox_id: str, snapshot: str = "") -> t.SandboxInfo:
        """Reset a sandbox in place to ``snapshot`` or its state at creation."""
        return await self._t.run(_api.rollback(sandbox_id, snapshot))

    async def load_dataset(self, path: str, *, instances: Sequence[str] = (), regex: str = "",
                           slice: str = "", skip_bad_rows: bool = False) -> t.InstancesLoaded:
        """Load a dataset file on the daemon's host."""
        return await self._t.run(_api.load_dataset(path, instances=instances, regex=regex, slice=slice,
                                                   skip_bad_rows=skip_bad_rows))

    async def add_instances(self, rows: Iterable[Mapping[str, Any]]) -> t.InstancesLoaded:
        """Add dataset rows inline."""
        return await self._t.run(_api.add_instances(rows))

    async def list_instances(self) -> List[str]:
        """The ids of every instance the daemon knows."""
        return await self._t.run(_api.list_instances())

    async def get_instance(self, instance_id: str) -> t.InstanceInfo:
        """An instance: problem statement, tests and resolved spec."""
        return await self._t.run(_api.get_instance(instance_id))

    async def instance_layers(self, instance_id: str) -> t.InstanceLayers:
        """Which layers a task of the instance needs and which the daemon's
        cache holds (nothing is built or fetched)."""
        return await self._t.run(_api.instance_layers(instance_id))

    async def submit_job(self, run_id: str, *, kind: str = "evaluation", instance_ids: Sequence[str] = (),
                         predictions: Iterable[Union[t.Prediction, Mapping[str, Any]]] = (),
                         gold: bool = False, workers: int = 0, keep_errors: bool = False,
                         repeat: int = 0) -> t.Job:
        """Start a batch evaluation or validation (see ``msb.Client.submit_job``)."""
        return await self._t.run(_api.submit_job(run_id=run_id, kind=kind, instance_ids=instance_ids,
                                                 predictions=predictions, gold=gold, workers=workers,
                                                 keep_errors=keep_errors, repeat=repeat))

    async def reusable(self, instance_id: str, results: Iterable[Mapping[str, Any]], *, kind: str = "evaluation",
                       prediction: Optional[Union[t.Prediction, Mapping[str, Any]]] = None,
                       keep_errors: bool = False, repeat: int = 0) -> t.Reuse:
        """Whether stored results stand (see ``msb.Client.reusable``)."""
        return await self._t.run(_api.reusable(instance_id, results, kind=kind, prediction=prediction,
                                               keep_errors=keep_errors, repeat=repeat))

    async def get_job(self, job_id: str) -> t.Job:
        """A job's progress; its report once done."""
        return await self._t.run(_api.get_job(job_id))

    async def list_jobs(self) -> List[t.Job]:
        """Every job of the daemon."""
        return await self._t.run(_api.list_jobs())

    async def cancel_job(self, job_id: str) -> t.Job:
        """Cancel a job; what finished is kept."""
        return await self._t.run(_api.cancel_job(job_id))

    async def wait_job(self, job_id: str, *, poll: float = 0.5, timeout: Optional[float] = None) -> t.Job:
        """Poll a job until it is no longer running; TimeoutError past timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = await self.get_job(job_id)
            if job.finished:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still running after {timeout}s ({job.done}/{job.total})")
            await asyncio.sleep(poll)

    async def gym_reset(self, instance_id: str = "", *, instance: Optional[Mapping[str, Any]] = None,
                        labels: Optional[Mapping[str, str]] = None, limits: Optional[t.Limits] = None,
                        lifetime: Optional[float] = None, idle_timeout: Optional[float] = None,
                        admission_wait: Optional[float] = None) -> t.GymObservation:
        """Start an episode: a task sandbox with a session ``gym`` in /testbed."""
        return await self._t.run(_api.gym_reset(instance_id=instance_id, instance=instance, labels=labels,
                                                limits=limits, lifetime=lifetime, idle_timeout=idle_timeout,
                                                admission_wait=admission_wait, timeout=self.create_timeout))

    async def gym_step(self, sandbox_id: str, command: str, *, timeout: Optional[float] = None) -> t.GymStep:
        """One bash command in the episode's session."""
        return await self._t.run(_api.gym_step(sandbox_id, command, timeout))

    async def gym_submit(self, sandbox_id: str, patch: Optional[str] = None, *, model: str = "",
                         keep: bool = False, repeat: int = 0) -> t.GymSubmitResult:
        """Grade the episode in a fresh sandbox (see ``msb.Client.gym_submit``)."""
        return await self._t.run(_api.gym_submit(sandbox_id, patch, model, keep, timeout=self.evaluate_timeout,
                                                 repeat=repeat))


class Sandbox:
    """A sandbox of a daemon. ``async with`` closes it at the end."""

    def __init__(self, client: Client, info: t.SandboxInfo) -> None:
        self.client = client
        self.info = info
        self.id = info.id
        self._t = client._t

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"msb.aio.Sandbox({self.id!r}, instance={self.info.instance_id!r})"

    async def refresh(self) -> t.SandboxInfo:
        """The sandbox's current description."""
        self.info = await self._t.run(_api.get_sandbox(self.id))
        return self.info

    async def close(self) -> t.SandboxInfo:
        """Kill everything in the sandbox and remove it (no error if gone)."""
        try:
            self.info = await self._t.run(_api.delete_sandbox(self.id))
        except (SandboxGone, NotFound):
            pass
        return self.info

    async def snapshot(self, name: str = "", *, processes: bool = False) -> t.SnapshotInfo:
        """Snapshot this sandbox (see ``msb.Client.snapshot``)."""
        return await self.client.snapshot(self.id, name, processes=processes)

    async def fork(self, n: int = 1, *, snapshot: str = "",
                   labels: Optional[Mapping[str, str]] = None, processes: bool = False) -> List["Sandbox"]:
        """``n`` new sandboxes from this one's state (see ``msb.Client.fork``)."""
        return await self.client.fork(self.id, n, snapshot=snapshot, labels=labels, processes=processes)

    async def rollback(self, snapshot: str = "") -> t.SandboxInfo:
        """Reset this sandbox to ``snapshot`` or its state at creation."""
        self.info = await self.client.rollback(self.id, snapshot)
        return self.info

    async def exec(self, command: str, *, cwd: str = "", env: Env = None, stdin: str = "",
                   timeout: Optional[float] = None, separate_stderr: bool = False, max_output: int = 0,
                   session: str = "") -> t.ExecResult:
        """Run ``command`` in a fresh bash (or ``session``) and wait for it."""
        body = _api.exec_body(command, session=session, cwd=cwd, env=env, stdin=stdin, timeout=timeout,
                              separate_stderr=separate_stderr, max_output=max_output)
        return await self._t.run(_api.exec_(self.id, body))

    async def exec_stream(self, command: str, *, cwd: str = "", env: Env = None, stdin: str = "",
                          timeout: Optional[float] = None, separate_stderr: bool = False,
                          max_output: int = 0, session: str = "") -> AsyncIterator[t.ExecEvent]:
        """Run ``command`` and yield its output events, then one ``result``."""
        body = _api.exec_body(command, session=session, cwd=cwd, env=env, stdin=stdin, timeout=timeout,
                              separate_stderr=separate_stderr, max_output=max_output)
        async for line in self._t.stream(_api.exec_stream(self.id, body)):
            yield _api.parse_event(line)

    async def session(self, name: str = "main", *, env: Env = None, cwd: str = "") -> "Session":
        """Open a persistent shell."""
        return Session(self, await self._t.run(_api.create_session(self.id, name, env=env, cwd=cwd)))

    async def sessions(self) -> List[str]:
        """Names of the sandbox's sessions."""
        return await self._t.run(_api.list_sessions(self.id))

    async def read_file(self, path: str, *, max_bytes: int = 0) -> bytes:
        """A file's bytes."""
        return await self._t.run(_api.read_file(self.id, path, max_bytes))

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """A file's text."""
        return (await self.read_file(path)).decode(encoding)

    async def write_file(self, path: str, data: Union[bytes, str], *, mode: Optional[int] = None) -> t.FileWritten:
        """Write a file (parent directories created)."""
        if isinstance(data, str):
            data = data.encode()
        return await self._t.run(_api.write_file(self.id, path, data, mode))

    async def stat(self, path: str) -> t.FileEntry:
        """One file's entry."""
        return await self._t.run(_api.stat(self.id, path))

    async def list_dir(self, path: str) -> List[t.FileEntry]:
        """A directory's entries."""
        return (await self._t.run(_api.list_dir(self.id, path))).entries

    async def upload(self, local: str, remote: str) -> t.FileWritten:
        """Copy a local file or directory into the sandbox."""
        if os.path.isdir(local):
            return await self._t.run(_api.put_tar(self.id, remote, _tar.pack(local)))
        with open(local, "rb") as f:
            return await self.write_file(remote, f.read(), mode=os.stat(local).st_mode & 0o777)

    async def download(self, remote: str, local: str) -> None:
        """Copy a file or directory out of the sandbox."""
        if (await self.stat(remote)).type == "dir":
            _tar.unpack(await self._t.run(_api.get_tar(self.id, remote)), local, strip=1)
            return
        os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        data = await self.read_file(remote)
        with open(local, "wb") as f:
            f.write(data)

    async def diff(self) -> str:
        """The agent's patch against the starting state."""
        return await self._t.run(_api.diff(self.id))

    async def evaluate(self, patch: Optional[str] = None, *, model: str = "",
                       artifacts: bool = False, repeat: int = 0) -> t.EvaluateResponse:
        """Grade ``patch`` (default: the diff) in a FRESH sandbox (see
        ``msb.Sandbox.evaluate``)."""
        return await self._t.run(_api.evaluate(self.id, patch, model, artifacts,
                                               timeout=self.client.evaluate_timeout, repeat=repeat))


class Session:
    """A persistent bash in a sandbox."""

    def __init__(self, sandbox: Sandbox, name: str) -> None:
        self.sandbox = sandbox
        self.name = name
        self._t = sandbox._t

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"msb.aio.Session({self.sandbox.id!r}, {self.name!r})"

    async def exec(self, command: str, *, timeout: Optional[float] = None, separate_stderr: bool = False,
                   max_output: int = 0) -> t.ExecResult:
        """Run ``command`` in the session."""
        body = _api.exec_body(command, timeout=timeout, separate_stderr=separate_stderr, max_output=max_output)
        return await self._t.run(_api.session_exec(self.sandbox.id, self.name, body))

    async def interrupt(self) -> bool:
        """Ctrl-C the running command; whether one ran."""
        return await self._t.run(_api.interrupt_session(self.sandbox.id, self.name))

    async def close(self) -> None:
        """Kill everything the session started."""
        try:
            await self._t.run(_api.close_session(self.sandbox.id, self.name))
        except (NotFound, SandboxGone):
            pass
