"""A mini-swe-agent environment on msb: ``msb.minisweagent.MsbEnvironment``.

Give it by dotted path where mini-swe-agent takes an environment class
(``environment_class: msb.minisweagent.MsbEnvironment`` in a config file,
or ``get_environment({"environment_class": ..., "instance_id": ...})``).
Each instance gets a task sandbox at the task's starting state in
/testbed; every command runs in a fresh bash there (or, with
``session: true``, in one persistent shell, a superset), stdout and stderr
merged, as mini-swe-agent's own environments do. Both ``execute`` forms
are accepted: v2's ``execute({"command": ...}, cwd, timeout=...)`` and
v1's ``execute("...", cwd, timeout=...)`` (SkyRL's example).

A command whose first output line is ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
and that exits 0 raises mini-swe-agent's ``Submitted`` with the rest of the
output (the patch), exactly as its environments do; ``evaluate`` then grades
that patch in a FRESH sandbox with SWE-bench's rules.

The module imports without mini-swe-agent (the ``Submitted`` raised is then
``msb.Submitted``).
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Union

from . import types as t
from .client import Client, Sandbox
from .errors import MsbError
from .errors import Submitted as MsbSubmitted


@dataclass
class MsbEnvironmentConfig:
    """What an MsbEnvironment is made from (the keys of its config block)."""

    #: an instance the daemon knows (or give ``instance``, a dataset row)
    instance_id: str = ""
    instance: Optional[Dict[str, Any]] = None
    #: attach to an existing sandbox instead of creating one (it is then not closed)
    sandbox_id: str = ""
    #: the daemon: socket path, unix:// or http:// URL (default: as the CLI finds it)
    address: str = ""
    token: str = ""
    cwd: str = "/testbed"
    env: Dict[str, str] = field(default_factory=dict)
    #: seconds per command unless execute() is given one
    timeout: int = 30
    #: run every command in one persistent shell instead of a fresh bash each
    session: bool = False
    labels: Dict[str, str] = field(default_factory=dict)
    memory_bytes: int = 0
    pids: int = 0
    cpus: float = 0.0
    #: seconds to wait for room on the daemon instead of failing at once
    admission_wait: float = 600.0
    #: per-stream output cap in bytes (0: the daemon's, 1 MiB)
    max_output: int = 0

    def model_dump(self, mode: Optional[str] = None) -> Dict[str, Any]:
        """The config as a dict (the name pydantic configs use, which
        mini-swe-agent calls)."""
        d = dataclasses.asdict(self)
        d.pop("token")
        return d


def _merge(*dicts: Mapping[str, Any]) -> Dict[str, Any]:
    try:
        from minisweagent.utils.serialize import recursive_merge
        return recursive_merge(*dicts)
    except ImportError:
        out: Dict[str, Any] = {}
        for d in dicts:
            for k, v in d.items():
                if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
                    out[k] = _merge(out[k], v)
                else:
                    out[k] = v
        return out


def _submitted(submission: str) -> Exception:
    """mini-swe-agent's Submitted for the installed version (v2 carries an
    exit message, v1 the text), or msb's when it is not installed."""
    try:
        import minisweagent
        from minisweagent.exceptions import Submitted  # type: ignore[attr-defined]
    except ImportError:
        try:
            from minisweagent.agents.default import Submitted  # type: ignore[no-redef]  # v1
        except ImportError:
            return MsbSubmitted(submission)
        return Submitted(submission)
    if str(getattr(minisweagent, "__version__", "2")).split(".")[0] in ("0", "1"):
        return Submitted(submission)
    return Submitted({"role": "exit", "content": submission,
                      "extra": {"exit_status": "Submitted", "submission": submission}})


def output_of(res: t.ExecResult, command: str, timeout: float) -> Dict[str, Any]:
    """An exec result as mini-swe-agent's environments report it."""
    if res.timed_out:
        msg = f"Command '{command}' timed out after {timeout:g} seconds"
        return {"output": res.stdout, "returncode": -1,
                "exception_info": f"An error occurred while executing the command: {msg}",
                "extra": {"exception_type": "TimeoutExpired", "exception": msg}}
    return {"output": res.stdout, "returncode": res.exit_code, "exception_info": ""}


def check_finished(output: Mapping[str, Any]) -> None:
    """Raise Submitted when the output submits (first line the marker, exit 0)."""
    lines = output.get("output", "").lstrip().splitlines(keepends=True)
    if lines and lines[0].strip() == t.SUBMIT_MARKER and output.get("returncode") == 0:
        raise _submitted("".join(lines[1:]))


class MsbEnvironment:
    """mini-swe-agent environment backed by an msb task sandbox."""

    def __init__(self, *, config_class: type = MsbEnvironmentConfig, client: Optional[Client] = None,
                 **kwargs: Any) -> None:
        self.config = config_class(**kwargs)
        c = self.config
        self.client = client or Client(c.address or None, token=c.token or None)
        self._owned = not c.sandbox_id
        if c.sandbox_id:
            self.sandbox: Sandbox = self.client.sandbox(c.sandbox_id)
        else:
            if not (c.instance_id or c.instance):
                raise ValueError("MsbEnvironment needs instance_id (or instance, a dataset row) or sandbox_id")
            self.sandbox = self.client.create_sandbox(
                c.instance_id, instance=c.instance, labels={"harness": "mini-swe-agent", **c.labels},
                limits=t.Limits(memory_bytes=c.memory_bytes, pids=c.pids, cpus=c.cpus),
                admission_wait=c.admission_wait, max_output=c.max_output)
        self._session = self.sandbox.session("mini", env=c.env, cwd=c.cwd) if c.session else None

    def execute(self, action: Union[Mapping[str, Any], str], cwd: str = "", *,
                timeout: Optional[int] = None) -> Dict[str, Any]:
        """Run one action (``{"command": ...}``, or the command string of v1)
        and return ``{"output", "returncode", "exception_info"}`` (plus
        ``extra`` on an exception, with return code -1)."""
        command = action if isinstance(action, str) else str(action.get("command", ""))
        limit = timeout or self.config.timeout
        try:
            if self._session is not None:
                if cwd:
                    command = f"cd {_quote(cwd)} && {command}"
                res = self._session.exec(command, timeout=limit)
            else:
                res = self.sandbox.exec(command, cwd=cwd or self.config.cwd, env=self.config.env, timeout=limit)
            output = output_of(res, command, limit)
        except MsbError as e:
            output = {"output": "", "returncode": -1,
                      "exception_info": f"An error occurred while executing the command: {e}",
                      "extra": {"exception_type": type(e).__name__, "exception": str(e)}}
        check_finished(output)
        return output

    def get_template_vars(self, **kwargs: Any) -> Dict[str, Any]:
        """The config, the platform and the sandbox, for the prompt templates."""
        return _merge(self.config.model_dump(), platform.uname()._asdict(),
                      {"sandbox_id": self.sandbox.id}, kwargs)

    def serialize(self) -> Dict[str, Any]:
        """The environment's part of a trajectory file."""
        return {"info": {"config": {
            "environment": self.config.model_dump(mode="json"),
            "environment_type": f"{self.__class__.__module__}.{self.__class__.__name__}",
        }}}

    def diff(self) -> str:
        """The agent's patch against the task's starting state."""
        return self.sandbox.diff()

    def evaluate(self, patch: Optional[str] = None, *, model: str = "") -> t.EvalResult:
        """Grade ``patch`` (default: the sandbox's diff) in a fresh sandbox."""
        return self.sandbox.evaluate(patch, model=model).result

    def close(self) -> None:
        """Close the sandbox (unless it was attached to, not created)."""
        if self._owned and self.sandbox is not None:
            self.sandbox.close()
        self._owned = False

    cleanup = close  # the name mini-swe-agent's environments use

    def __enter__(self) -> "MsbEnvironment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"
