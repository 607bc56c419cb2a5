"""The synchronous client of msb serve.

``Client`` talks to one daemon; ``Sandbox`` is a handle on one of its
sandboxes (a context manager that closes it), ``Session`` on a persistent
shell in a sandbox. Every method is one request (docs/api.md); errors are
the exceptions of ``msb.errors``.

>>> import msb
>>> with msb.Client() as c, c.create_sandbox(instance_id="demo__calc-1") as sb:
...     print(sb.exec("git status --short; python -c 'import calc'").stdout)
...     result = sb.evaluate()          # graded in a fresh sandbox
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _api, _tar
from . import types as t
from ._api import Env
from .errors import NotFound, SandboxGone
from ._transport import Address, SyncTransport, resolve_endpoint


class Client:
    """A connection to one msb daemon.

    ``address``: a socket path, ``unix://PATH``, ``http://HOST:PORT`` or
    ``https://HOST:PORT`` (``msb serve --tls-cert``), or an ``Address``
    (default: MSB_SOCKET, else the daemon's default socket). ``token`` (or
    ``token_file``) is for TCP (default: MSB_TOKEN, else MSB_TOKEN_FILE); a
    unix socket needs none. An https daemon's certificate is verified against
    ``ca_file`` (PEM CA certificates) if given, else the system's CA store
    (or SSL_CERT_FILE's). ``create_timeout`` and
    ``evaluate_timeout`` bound, in seconds, the wait for a sandbox's creation
    (plus its ``admission_wait``; a create may build the environment first)
    and for a grading (``evaluate``, ``gym_submit``): past them the call
    raises ``RequestTimeout`` (default one hour each; None waits as long as
    it takes). Other calls have bounds of their own. Safe to share between
    threads (each thread gets its own keep-alive connection).
    """

    def __init__(self, address: Union[str, Address, None] = None, *, token: Optional[str] = None,
                 token_file: Optional[str] = None, ca_file: Optional[str] = None,
                 create_timeout: Optional[float] = _api.CREATE_TIMEOUT,
                 evaluate_timeout: Optional[float] = _api.EVALUATE_TIMEOUT) -> None:
        addr, token = resolve_endpoint(address, token, token_file)
        self.address = addr
        #: seconds to wait for a create (plus its admission_wait) and for a
        #: grading (evaluate, gym_submit) before RequestTimeout; None: no bound
        self.create_timeout = create_timeout
        self.evaluate_timeout = evaluate_timeout
        self._t = SyncTransport(addr, token, ca_file=ca_file)

    def close(self) -> None:
        """Close this thread's connection (sandboxes stay; close them first)."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"msb.Client({self.address.url()!r})"

    # Daemon -----------------------------------------------------------------

    def health(self) -> t.Health:
        """The daemon's status, mode, limits' enforcement and quota."""
        return self._t.run(_api.health())

    # Sandboxes --------------------------------------------------------------

    def create_sandbox(self, instance_id: str = "", *, instance: Optional[Mapping[str, Any]] = None,
                       layers: Sequence[str] = (), host_base: bool = False, workdir: str = "",
                       env: Env = None, network: str = "", labels: Optional[Mapping[str, str]] = None,
                       limits: Optional[t.Limits] = None, lifetime: Optional[float] = None,
                       idle_timeout: Optional[float] = None, admission_wait: Optional[float] = None,
                       max_output: int = 0, image: str = "", warm: int = 0) -> "Sandbox":
        """Create a sandbox: a task sandbox of ``instance_id`` (or of an
        inline dataset row ``instance``) at the task's starting state in
        /testbed, or a raw one from cache ``layers`` or the host's system
        directories (``host_base``), or on ``image``: an image or Debian
        base the daemon's cache holds (a reference, ``image/<ref>``,
        ``sha256:<digest>``, ``debian/<name>``), whose Env comes before
        ``env``, whose WorkingDir is the default ``workdir`` (NotFound when
        the cache lacks it). Times are seconds; ``admission_wait``
        waits that long for room instead of failing with QuotaExceeded.
        ``warm`` (an instance or an image) asks the daemon to keep that
        many sandboxes like this one started ahead, taken by the next
        creates (bounded by its ``--spares``)."""
        info = self._t.run(_api.create_sandbox(
            instance_id=instance_id, instance=instance, layers=layers, host_base=host_base, workdir=workdir,
            env=env, network=network, labels=labels, limits=limits, lifetime=lifetime,
            idle_timeout=idle_timeout, admission_wait=admission_wait, max_output=max_output, image=image,
            warm=warm, timeout=self.create_timeout))
        return Sandbox(self, info)

    def sandbox(self, sandbox_id: str) -> "Sandbox":
        """A handle on an existing sandbox (checked to exist)."""
        return Sandbox(self, self._t.run(_api.get_sandbox(sandbox_id)))

    def get_sandbox(self, sandbox_id: str) -> t.SandboxInfo:
        """A sandbox's description, also for one closed or reaped recently."""
        return self._t.run(_api.get_sandbox(sandbox_id))

    def list_sandboxes(self, labels: Optional[Mapping[str, str]] = None) -> List[t.SandboxInfo]:
        """Live sandboxes whose labels include every given label, oldest first."""
        return self._t.run(_api.list_sandboxes(labels))

    def close_sandbox(self, sandbox_id: str) -> t.SandboxInfo:
        """Kill everything in a sandbox and remove it."""
        return self._t.run(_api.delete_sandbox(sandbox_id))

    # Snapshots --------------------------------------------------------------

    def snapshot(self, sandbox_id: str, name: str = "", *, processes: bool = False) -> t.SnapshotInfo:
        """Keep what a live sandbox wrote, and its sessions' cwd and
        environment, as a snapshot (the sandbox is frozen while its writes
        are copied). Without ``name`` the snapshot is anonymous: only the
        sandboxes forked from it keep it. With ``processes`` (a root-mode
        daemon with criu 4.x) its running processes are dumped in the same
        freeze and kept with it: ``fork_snapshot(name, processes=True)``
        goes on with them, also once the sandbox is closed."""
        return self._t.run(_api.snapshot(sandbox_id, name, processes))

    def snapshots(self) -> List[t.SnapshotInfo]:
        """The daemon's named snapshots, oldest first."""
        return self._t.run(_api.list_snapshots())

    def delete_snapshot(self, name: str) -> None:
        """Drop a named snapshot (its layer stays while a sandbox uses it)."""
        self._t.run(_api.delete_snapshot(name))

    def fork(self, sandbox_id: str, n: int = 1, *, snapshot: str = "",
             labels: Optional[Mapping[str, str]] = None, processes: bool = False) -> List["Sandbox"]:
        """Start ``n`` sandboxes from a live sandbox's state now (or from its
        ``snapshot``), each with its own writes, the parent's limits, labels
        (plus ``labels``) and network, and its sessions reopened in the cwd
        and environment they had. Running processes are not carried unless
        ``processes`` (the state now, a root-mode daemon with criu 4.x): each
        child then goes on with every process of the parent, its sessions'
        shells among them; a daemon that cannot carry them refuses the fork
        (``msb.BadRequest``, saying why)."""
        infos = self._t.run(_api.fork(sandbox_id, n, snapshot=snapshot, labels=labels, processes=processes,
                                      timeout=self.create_timeout))
        return [Sandbox(self, i) for i in infos]

    def fork_snapshot(self, name: str, n: int = 1, *, labels: Optional[Mapping[str, str]] = None,
                      warm: int = 0, processes: bool = False) -> List["Sandbox"]:
        """Start ``n`` sandboxes from the named snapshot, also once the
        sandbox it was taken of is closed (see ``fork``). ``warm`` asks the
        daemon to keep that many children started ahead for the next
        forks (bounded by its ``--spares``). ``processes`` goes on with the
        processes kept with a snapshot taken with ``processes``."""
        infos = self._t.run(_api.fork_snapshot(name, n, labels=labels, warm=warm, processes=processes,
                                               timeout=self.create_timeout))
        return [Sandbox(self, i) for i in infos]

    def create_sandboxes(self, n: int, instance_id: str = "", **kw: Any) -> List["Sandbox"]:
        """Create ``n`` sandboxes like ``create_sandbox(instance_id, **kw)``
        in one call, all or none: if one cannot be made (QuotaExceeded
        naming the limit), none is left."""
        infos = self._t.run(_api.create_sandboxes(n, instance_id=instance_id, timeout=self.create_timeout, **kw))
        return [Sandbox(self, i) for i in infos]

    def rollback(self, sandbox_id: str, snapshot: str = "") -> t.SandboxInfo:
        """Reset a sandbox in place (same id) to ``snapshot``, or to its state
        at creation: its processes are killed, its writes since dropped and
        its sessions restarted."""
        return self._t.run(_api.rollback(sandbox_id, snapshot))

    # Instances --------------------------------------------------------------

    def load_dataset(self, path: str, *, instances: Sequence[str] = (), regex: str = "", slice: str = "",
                     skip_bad_rows: bool = False) -> t.InstancesLoaded:
        """Load a dataset file on the daemon's host (the CLI's filters)."""
        return self._t.run(_api.load_dataset(path, instances=instances, regex=regex, slice=slice,
                                             skip_bad_rows=skip_bad_rows))

    def add_instances(self, rows: Iterable[Mapping[str, Any]]) -> t.InstancesLoaded:
        """Add dataset rows (SWE-bench, SWE-smith, SWE-Gym or custom) inline."""
        return self._t.run(_api.add_instances(rows))

    def list_instances(self) -> List[str]:
        """The ids of every instance the daemon knows."""
        return self._t.run(_api.list_instances())

    def get_instance(self, instance_id: str) -> t.InstanceInfo:
        """An instance: problem statement, tests and resolved spec."""
        return self._t.run(_api.get_instance(instance_id))

    def instance_layers(self, instance_id: str) -> t.InstanceLayers:
        """Which layers a task of the instance needs and which the daemon's
        cache holds (nothing is built or fetched)."""
        return self._t.run(_api.instance_layers(instance_id))

    # Jobs -------------------------------------------------------------------

    def submit_job(self, run_id: str, *, kind: str = "evaluation", instance_ids: Sequence[str] = (),
                   predictions: Iterable[Union[t.Prediction, Mapping[str, Any]]] = (), gold: bool = False,
                   workers: int = 0, keep_errors: bool = False, repeat: int = 0) -> t.Job:
        """Start a batch evaluation of ``predictions`` (or of every
        instance's ``gold`` patch), or a ``validation``; the harness's files
        go under the daemon's --out/run_id. A rerun of a run_id resumes.
        ``repeat`` runs each evaluation's tests that many times and marks
        the results whose tests flip ``flaky``."""
        return self._t.run(_api.submit_job(run_id=run_id, kind=kind, instance_ids=instance_ids,
                                           predictions=predictions, gold=gold, workers=workers,
                                           keep_errors=keep_errors, repeat=repeat))

    def reusable(self, instance_id: str, results: Iterable[Mapping[str, Any]], *, kind: str = "evaluation",
                 prediction: Optional[Union[t.Prediction, Mapping[str, Any]]] = None,
                 keep_errors: bool = False, repeat: int = 0) -> t.Reuse:
        """Whether ``results`` (the ``result.json`` an earlier run stored,
        one per model) stand for a run's evaluations of the instance now, by
        the rule runs resume by: a ``prediction``, else the gold patch (or,
        for kind ``validation``, the gold and the empty patch)."""
        return self._t.run(_api.reusable(instance_id, results, kind=kind, prediction=prediction,
                                         keep_errors=keep_errors, repeat=repeat))

    def get_job(self, job_id: str) -> t.Job:
        """A job's progress; its report once done."""
        return self._t.run(_api.get_job(job_id))

    def list_jobs(self) -> List[t.Job]:
        """Every job of the daemon."""
        return self._t.run(_api.list_jobs())

    def cancel_job(self, job_id: str) -> t.Job:
        """Cancel a job; what finished is kept."""
        return self._t.run(_api.cancel_job(job_id))

    def wait_job(self, job_id: str, *, poll: float = 0.5, timeout: Optional[float] = None) -> t.Job:
        """Poll a job until it is no longer running; TimeoutError past timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            if job.finished:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still running after {timeout}s ({job.done}/{job.total})")
            time.sleep(poll)

    # Gym --------------------------------------------------------------------

    def gym_reset(self, instance_id: str = "", *, instance: Optional[Mapping[str, Any]] = None,
                  labels: Optional[Mapping[str, str]] = None, limits: Optional[t.Limits] = None,
                  lifetime: Optional[float] = None, idle_timeout: Optional[float] = None,
                  admission_wait: Optional[float] = None) -> t.GymObservation:
        """Start an episode: a task sandbox with a session ``gym`` in /testbed."""
        return self._t.run(_api.gym_reset(instance_id=instance_id, instance=instance, labels=labels,
                                          limits=limits, lifetime=lifetime, idle_timeout=idle_timeout,
                                          admission_wait=admission_wait, timeout=self.create_timeout))

    def gym_step(self, sandbox_id: str, command: str, *, timeout: Optional[float] = None) -> t.GymStep:
        """One bash command in the episode's session."""
        return self._t.run(_api.gym_step(sandbox_id, command, timeout))

    def gym_submit(self, sandbox_id: str, patch: Optional[str] = None, *, model: str = "",
                   keep: bool = False, repeat: int = 0) -> t.GymSubmitResult:
        """Grade the episode (its diff, or ``patch``) in a fresh sandbox
        (``repeat`` times: ``flaky`` when the tests flip)."""
        return self._t.run(_api.gym_submit(sandbox_id, patch, model, keep, timeout=self.evaluate_timeout,
                                           repeat=repeat))


class Sandbox:
    """A sandbox of a daemon. ``with`` closes it at the end."""

    def __init__(self, client: Client, info: t.SandboxInfo) -> None:
        self.client = client
        self.info = info
        self.id = info.id
        self._t = client._t

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"msb.Sandbox({self.id!r}, instance={self.info.instance_id!r})"

    def refresh(self) -> t.SandboxInfo:
        """The sandbox's current description (state, sessions, last activity)."""
        self.info = self._t.run(_api.get_sandbox(self.id))
        return self.info

    def close(self) -> t.SandboxInfo:
        """Kill everything in the sandbox and remove it; closing a sandbox
        that is already gone is not an error."""
        try:
            self.info = self._t.run(_api.delete_sandbox(self.id))
        except (SandboxGone, NotFound):
            pass
        return self.info

    # Commands ---------------------------------------------------------------

    def exec(self, command: str, *, cwd: str = "", env: Env = None, stdin: str = "",
             timeout: Optional[float] = None, separate_stderr: bool = False, max_output: int = 0,
             session: str = "") -> t.ExecResult:
        """Run bash source ``command`` in a fresh bash (or in ``session``) and
        wait for it. A timeout (seconds) is no error: the result says
        ``timed_out``."""
        body = _api.exec_body(command, session=session, cwd=cwd, env=env, stdin=stdin, timeout=timeout,
                              separate_stderr=separate_stderr, max_output=max_output)
        return self._t.run(_api.exec_(self.id, body))

    def exec_stream(self, command: str, *, cwd: str = "", env: Env = None, stdin: str = "",
                    timeout: Optional[float] = None, separate_stderr: bool = False, max_output: int = 0,
                    session: str = "") -> Iterator[t.ExecEvent]:
        """Run ``command`` and yield its output as it comes (``stdout`` and
        ``stderr`` events), then one ``result`` event; an ``error`` event
        raises the API's exception."""
        body = _api.exec_body(command, session=session, cwd=cwd, env=env, stdin=stdin, timeout=timeout,
                              separate_stderr=separate_stderr, max_output=max_output)
        for line in self._t.stream(_api.exec_stream(self.id, body)):
            yield _api.parse_event(line)

    def session(self, name: str = "main", *, env: Env = None, cwd: str = "") -> "Session":
        """Open a persistent shell (cwd, variables and functions persist)."""
        return Session(self, self._t.run(_api.create_session(self.id, name, env=env, cwd=cwd)))

    def sessions(self) -> List[str]:
        """Names of the sandbox's sessions."""
        return self._t.run(_api.list_sessions(self.id))

    # Files ------------------------------------------------------------------

    def read_file(self, path: str, *, max_bytes: int = 0) -> bytes:
        """A file's bytes (path resolved inside the sandbox)."""
        return self._t.run(_api.read_file(self.id, path, max_bytes))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """A file's text."""
        return self.read_file(path).decode(encoding)

    def write_file(self, path: str, data: Union[bytes, str], *, mode: Optional[int] = None) -> t.FileWritten:
        """Write a file (parent directories created); ``mode`` e.g. 0o755."""
        if isinstance(data, str):
            data = data.encode()
        return self._t.run(_api.write_file(self.id, path, data, mode))

    def stat(self, path: str) -> t.FileEntry:
        """One file's entry."""
        return self._t.run(_api.stat(self.id, path))

    def list_dir(self, path: str) -> List[t.FileEntry]:
        """A directory's entries."""
        return self._t.run(_api.list_dir(self.id, path)).entries

    def upload(self, local: str, remote: str) -> t.FileWritten:
        """Copy a local file or directory into the sandbox: a directory's
        contents land in ``remote`` (created), a file at ``remote``."""
        if os.path.isdir(local):
            return self._t.run(_api.put_tar(self.id, remote, _tar.pack(local)))
        with open(local, "rb") as f:
            return self.write_file(remote, f.read(), mode=os.stat(local).st_mode & 0o777)

    def download(self, remote: str, local: str) -> None:
        """Copy a file or directory out of the sandbox: a directory's
        contents into ``local`` (created), a file to ``local``."""
        if self.stat(remote).type == "dir":
            _tar.unpack(self._t.run(_api.get_tar(self.id, remote)), local, strip=1)
            return
        os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        with open(local, "wb") as f:
            f.write(self.read_file(remote))

    # Snapshots --------------------------------------------------------------

    def snapshot(self, name: str = "", *, processes: bool = False) -> t.SnapshotInfo:
        """Snapshot this sandbox (see ``Client.snapshot``)."""
        return self.client.snapshot(self.id, name, processes=processes)

    def fork(self, n: int = 1, *, snapshot: str = "", labels: Optional[Mapping[str, str]] = None,
             processes: bool = False) -> List["Sandbox"]:
        """``n`` new sandboxes from this one's state (see ``Client.fork``)."""
        return self.client.fork(self.id, n, snapshot=snapshot, labels=labels, processes=processes)

    def rollback(self, snapshot: str = "") -> t.SandboxInfo:
        """Reset this sandbox to ``snapshot`` or its state at creation."""
        self.info = self.client.rollback(self.id, snapshot)
        return self.info

    # Task -------------------------------------------------------------------

    def diff(self) -> str:
        """The agent's patch: every change in /testbed against the starting state."""
        return self._t.run(_api.diff(self.id))

    def evaluate(self, patch: Optional[str] = None, *, model: str = "", artifacts: bool = False,
                 repeat: int = 0) -> t.EvaluateResponse:
        """Grade ``patch`` (default: this sandbox's diff) in a FRESH sandbox
        of the same instance, with SWE-bench's rules; never in this one.
        ``repeat`` runs the tests that many times, each in a fresh sandbox,
        and marks the result ``flaky`` when a test's status flips."""
        return self._t.run(_api.evaluate(self.id, patch, model, artifacts,
                                         timeout=self.client.evaluate_timeout, repeat=repeat))


class Session:
    """A persistent bash in a sandbox; commands run one at a time."""

    def __init__(self, sandbox: Sandbox, name: str) -> None:
        self.sandbox = sandbox
        self.name = name
        self._t = sandbox._t

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"msb.Session({self.sandbox.id!r}, {self.name!r})"

    def exec(self, command: str, *, timeout: Optional[float] = None, separate_stderr: bool = False,
             max_output: int = 0) -> t.ExecResult:
        """Run ``command`` in the session. A timeout interrupts it and leaves
        the session usable; ``session_ended`` says the shell exited."""
        body = _api.exec_body(command, timeout=timeout, separate_stderr=separate_stderr, max_output=max_output)
        return self._t.run(_api.session_exec(self.sandbox.id, self.name, body))

    def interrupt(self) -> bool:
        """Ctrl-C the running command (then SIGKILL after 2 s); whether one ran."""
        return self._t.run(_api.interrupt_session(self.sandbox.id, self.name))

    def close(self) -> None:
        """Kill everything the session started."""
        try:
            self._t.run(_api.close_session(self.sandbox.id, self.name))
        except (NotFound, SandboxGone):
            pass

