"""rLLM's ``Sandbox`` protocol on msb: ``msb.rllm.MsbSandbox``.

rLLM's agents call ``exec(command, timeout=None, user=None) -> str`` (the
output; a non-zero exit raises), ``upload_file(local, remote)``,
``upload_dir(local, remote)``, ``close()`` and ``is_alive()`` (never
raises). ``create_sandbox(image=...)`` takes a snapshot by reference: here
an instance id (the task sandbox at its starting state), ``"host"`` for
a raw sandbox on the host's system directories, or a snapshot reference
(``"snapshot:NAME"``). ``WarmPool`` keeps sandboxes created ahead, so an
episode never waits for one.

rLLM's snapshot triad: ``build_snapshot`` bakes an environment (an image
plus setup commands) into a named msb snapshot and returns its reference;
``create_sandbox(ref)`` starts a sandbox from it (``SnapshotNotFound`` when
it is gone); ``delete_snapshot(ref)`` removes it, and ``snapshot_absent``
asks, without starting anything, whether it is gone.

rLLM itself is not on PyPI, so this follows its protocol as documented
(INTERFACES.md); the tests drive it against a real daemon.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Dict, Optional, Sequence

from . import types as t
from .client import Client, Sandbox
from .errors import MsbError, NotFound

#: the prefix of a snapshot reference: ``snapshot:NAME``
SNAPSHOT_PREFIX = "snapshot:"


class SnapshotNotFound(NotFound):
    """A snapshot reference names no snapshot of the daemon (deleted)."""


class SandboxCommandError(MsbError):
    """A command exited non-zero (or timed out): ``exit_code``, ``output``."""

    def __init__(self, command: str, res: t.ExecResult) -> None:
        what = "timed out" if res.timed_out else f"exited {res.exit_code}"
        super().__init__(f"command {what}: {command[:200]}\n{res.stdout[-2000:]}")
        self.exit_code = res.exit_code
        self.output = res.stdout
        self.timed_out = res.timed_out


class MsbSandbox:
    """An msb sandbox behind rLLM's Sandbox protocol."""

    def __init__(self, sandbox: Sandbox, default_timeout: float = 600.0) -> None:
        self.sandbox = sandbox
        self.default_timeout = default_timeout

    def exec(self, command: str, timeout: Optional[float] = None, user: Optional[str] = None) -> str:
        """Run command (as ``user`` via runuser when given); its output, or
        SandboxCommandError on a non-zero exit or a timeout."""
        if user and user != "root":
            command = f"runuser -u {user} -- bash -c {_quote(command)}"
        res = self.sandbox.exec(command, timeout=timeout or self.default_timeout)
        if res.exit_code != 0 or res.timed_out:
            raise SandboxCommandError(command, res)
        return res.stdout

    def upload_file(self, local: str, remote: str) -> None:
        """Copy a local file into the sandbox."""
        self.sandbox.upload(local, remote)

    def upload_dir(self, local: str, remote: str) -> None:
        """Copy a local directory's contents into remote."""
        self.sandbox.upload(local, remote)

    def is_alive(self) -> bool:
        """Whether the sandbox is still running (never raises)."""
        try:
            return self.sandbox.refresh().state == "running"
        except Exception:  # noqa: BLE001  the protocol says: never raises
            return False

    def close(self) -> None:
        """Close the sandbox."""
        self.sandbox.close()

    def evaluate(self, patch: Optional[str] = None) -> t.EvalResult:
        """Grade ``patch`` (default: the diff) in a fresh sandbox."""
        return self.sandbox.evaluate(patch).result


def create_sandbox(image: str, *, client: Optional[Client] = None, labels: Optional[Dict[str, str]] = None,
                   **kwargs: Any) -> MsbSandbox:
    """A sandbox from a reference: an instance id, "host", or
    "snapshot:NAME" (a sandbox forked from the snapshot; SnapshotNotFound
    when it is gone)."""
    c = client or Client()
    labels = {"harness": "rllm", **(labels or {})}
    if image.startswith(SNAPSHOT_PREFIX):
        if kwargs:
            raise TypeError(f"a sandbox of a snapshot has the snapshot's settings: {sorted(kwargs)} do not apply")
        try:
            [sb] = c.fork_snapshot(_snapshot_name(image), labels=labels)
        except NotFound as e:
            raise SnapshotNotFound(e.message, code=e.code, status=e.status, request_id=e.request_id) from e
        return MsbSandbox(sb)
    if image == "host":
        return MsbSandbox(c.create_sandbox(host_base=True, labels=labels, **kwargs))
    return MsbSandbox(c.create_sandbox(image, labels=labels, **kwargs))


def build_snapshot(image: str, key: str, prior_ref: Optional[str] = None, *, force: bool = False,
                   setup: Sequence[str] = (), client: Optional[Client] = None, timeout: float = 3600.0) -> str:
    """Bake ``image`` (an instance id or "host") with the ``setup`` commands
    run in order into the snapshot named ``key``; its reference. A
    ``prior_ref`` that still exists is reused unless ``force``, which
    rebuilds. A setup command that fails raises SandboxCommandError and
    leaves no snapshot."""
    c = client or Client()
    if prior_ref and not force and not snapshot_absent(prior_ref, client=c):
        return prior_ref
    sb = create_sandbox(image, client=c, labels={"rllm": "build-snapshot"})
    sb.default_timeout = timeout
    try:
        for cmd in setup:
            sb.exec(cmd)
        if force:
            delete_snapshot(SNAPSHOT_PREFIX + key, client=c)
        sb.sandbox.snapshot(key)
    finally:
        sb.close()
    return SNAPSHOT_PREFIX + key


def delete_snapshot(ref: str, *, client: Optional[Client] = None) -> bool:
    """Delete the snapshot ``ref`` names; True once it is gone (also when
    it was gone already)."""
    c = client or Client()
    try:
        c.delete_snapshot(_snapshot_name(ref))
    except NotFound:
        pass
    return True


def snapshot_absent(ref: str, *, client: Optional[Client] = None) -> bool:
    """Whether the snapshot ``ref`` names is gone (nothing is started)."""
    c = client or Client()
    name = _snapshot_name(ref)
    return all(s.name != name for s in c.snapshots())


def _snapshot_name(ref: str) -> str:
    if not ref.startswith(SNAPSHOT_PREFIX):
        raise ValueError(f"{ref!r} is not a snapshot reference ({SNAPSHOT_PREFIX}NAME)")
    return ref[len(SNAPSHOT_PREFIX):]


class WarmPool:
    """Sandboxes of one snapshot created ahead by a background thread;
    ``get()`` hands one out and starts making its replacement."""

    def __init__(self, image: str, size: int, *, client: Optional[Client] = None, **kwargs: Any) -> None:
        self.image = image
        self.client = client or Client()
        self.kwargs = kwargs
        self._q: "queue.Queue[Any]" = queue.Queue()
        self._want = threading.Semaphore(size)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._fill, daemon=True, name="msb-warm-pool")
        self._thread.start()

    def _fill(self) -> None:
        while True:
            self._want.acquire()
            if self._closed.is_set():
                return
            try:
                self._q.put(create_sandbox(self.image, client=self.client, **self.kwargs))
            except Exception as e:  # noqa: BLE001  handed to the next get()
                self._q.put(e)

    def get(self, timeout: Optional[float] = None) -> MsbSandbox:
        """A started sandbox (waits for one when the pool is empty)."""
        item = self._q.get(timeout=timeout)
        self._want.release()
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        """Stop filling and close the sandboxes not handed out."""
        self._closed.set()
        self._want.release()
        self._thread.join(timeout=60)
        while not self._q.empty():
            item = self._q.get_nowait()
            if isinstance(item, MsbSandbox):
                item.close()


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"
