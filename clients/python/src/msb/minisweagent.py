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

mini-swe-agent's batch runner (``mini-extra swebench``) makes each
instance's environment from the config block alone and then runs the
config's ``run.env_startup_command``, rendered with the instance's fields.
Without an instance the environment has no sandbox yet; the startup command
``msb-instance {{instance_id}}`` creates it (docs/python.md). Config keys of
other environments (e.g. ``image``) are ignored with a warning, as
mini-swe-agent's own configs ignore unknown keys; ``interpreter`` must be
bash's.

The module imports without mini-swe-agent (the ``Submitted`` raised is then
``msb.Submitted``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import platform
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from . import types as t
from .client import Client, Sandbox
from .errors import MsbError
from .errors import Submitted as MsbSubmitted

log = logging.getLogger(__name__)

#: the command that gives an environment made without an instance its
#: sandbox: ``msb-instance <instance_id>`` (mini-swe-agent's batch runner
#: runs it as ``run.env_startup_command: "msb-instance {{instance_id}}"``)
START_COMMAND = "msb-instance"


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
    #: how commands run: msb runs them with bash (what mini-swe-agent's
    #: configs say); anything else is refused
    interpreter: List[str] = field(default_factory=lambda: ["bash", "-c"])

    def __post_init__(self) -> None:
        if not self.interpreter or os.path.basename(self.interpreter[0]) != "bash":
            raise ValueError(f"MsbEnvironment runs commands with bash; interpreter {self.interpreter!r} "
                             "is not supported")

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
        self.config = config_class(**_known(config_class, kwargs))
        c = self.config
        self.client = client or Client(c.address or None, token=c.token or None)
        self._owned = not c.sandbox_id
        self.sandbox: Optional[Sandbox] = None
        self._session = None
        if c.sandbox_id:
            self._bind(self.client.sandbox(c.sandbox_id))
        elif c.instance_id or c.instance:
            self._create(c.instance_id)

    def _create(self, instance_id: str) -> None:
        c = self.config
        self._bind(self.client.create_sandbox(
            instance_id, instance=c.instance, labels={"harness": "mini-swe-agent", **c.labels},
            limits=t.Limits(memory_bytes=c.memory_bytes, pids=c.pids, cpus=c.cpus),
            admission_wait=c.admission_wait, max_output=c.max_output))

    def _bind(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        c = self.config
        self._session = sandbox.session("mini", env=c.env, cwd=c.cwd) if c.session else None

    def _start(self, command: str) -> Optional[Dict[str, Any]]:
        """The output of ``msb-instance <id>``, which creates the sandbox of
        an environment made without one; None for any other command."""
        try:
            words = shlex.split(command) if command.lstrip().startswith(START_COMMAND) else []
        except ValueError:
            words = []
        if not words or words[0] != START_COMMAND:
            return None
        if len(words) != 2 or self.sandbox is not None:
            why = "has a sandbox already" if self.sandbox is not None else f"takes one instance id, got {words[1:]}"
            return _failed(f"{START_COMMAND}: {why}", "ValueError")
        self.config.instance_id = words[1]
        self._create(words[1])
        assert self.sandbox is not None
        return {"output": f"sandbox {self.sandbox.id} of {words[1]}\n", "returncode": 0, "exception_info": ""}

    def execute(self, action: Union[Mapping[str, Any], str], cwd: str = "", *,
                timeout: Optional[int] = None) -> Dict[str, Any]:
        """Run one action (``{"command": ...}``, or the command string of v1)
        and return ``{"output", "returncode", "exception_info"}`` (plus
        ``extra`` on an exception, with return code -1)."""
        command = action if isinstance(action, str) else str(action.get("command", ""))
        limit = timeout or self.config.timeout
        try:
            started = self._start(command)
            if started is not None:
                return started
            if self.sandbox is None:
                return _failed(f"no sandbox: give instance_id, or run `{START_COMMAND} <instance_id>` first "
                               "(run.env_startup_command)", "ValueError")
            if self._session is not None:
                if cwd:
                    command = f"cd {_quote(cwd)} && {command}"
                res = self._session.exec(command, timeout=limit)
            else:
                res = self.sandbox.exec(command, cwd=cwd or self.config.cwd, env=self.config.env, timeout=limit)
            output = output_of(res, command, limit)
        except MsbError as e:
            output = _failed(str(e), type(e).__name__)
        check_finished(output)
        return output

    def get_template_vars(self, **kwargs: Any) -> Dict[str, Any]:
        """The config, the platform and the sandbox, for the prompt templates."""
        return _merge(self.config.model_dump(), platform.uname()._asdict(),
                      {"sandbox_id": self.sandbox.id if self.sandbox else ""}, kwargs)

    def serialize(self) -> Dict[str, Any]:
        """The environment's part of a trajectory file."""
        return {"info": {"config": {
            "environment": self.config.model_dump(mode="json"),
            "environment_type": f"{self.__class__.__module__}.{self.__class__.__name__}",
        }}}

    def _sandbox(self) -> Sandbox:
        if self.sandbox is None:
            raise MsbError(f"no sandbox yet: give instance_id, or run `{START_COMMAND} <instance_id>`")
        return self.sandbox

    def diff(self) -> str:
        """The agent's patch against the task's starting state."""
        return self._sandbox().diff()

    def evaluate(self, patch: Optional[str] = None, *, model: str = "") -> t.EvalResult:
        """Grade ``patch`` (default: the sandbox's diff) in a fresh sandbox."""
        return self._sandbox().evaluate(patch, model=model).result

    def close(self) -> None:
        """Close the sandbox (unless it was attached to, not created)."""
        if self._owned and self.sandbox is not None:
            self.sandbox.close()
        self._owned = False

    cleanup = close  # the name mini-swe-agent's environments use

    def __del__(self) -> None:
        # mini-swe-agent's batch runner drops its environments without
        # closing them (its Docker environment stops its container here too).
        try:
            if getattr(self, "_owned", False):
                self.close()
        except Exception as e:  # noqa: BLE001  nothing to raise to at collection
            log.warning("closing the sandbox of a dropped MsbEnvironment: %s", e)

    def __enter__(self) -> "MsbEnvironment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _known(config_class: type, kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """kwargs the config class has; the others (another environment's keys,
    as a shared config file holds them) are left out with a warning."""
    names = {f.name for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else None
    if names is None:
        return dict(kwargs)
    unknown = sorted(k for k in kwargs if k not in names)
    if unknown:
        log.warning("MsbEnvironment ignores config keys it does not know: %s", ", ".join(unknown))
    return {k: v for k, v in kwargs.items() if k in names}


def _failed(message: str, kind: str) -> Dict[str, Any]:
    """An output that reports an exception, as mini-swe-agent's environments do."""
    return {"output": "", "returncode": -1,
            "exception_info": f"An error occurred while executing the command: {message}",
            "extra": {"exception_type": kind, "exception": message}}


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"
