"""Typed forms of the wire bodies of msb serve's native API (docs/api.md).

Every class here is a frozen-free dataclass whose fields carry the JSON
names of ``internal/api`` (snake_case; a few keep the harness's spelling,
such as ``FAIL_TO_PASS`` and ``model_name_or_path``, recorded in the field's
``json`` metadata). ``from_json`` builds one from a decoded body and ignores
fields it does not know, so a newer daemon does not break an older client;
``to_json`` gives the body of a request, leaving out fields at their zero
value, as the daemon's ``omitempty`` does.

Durations are integer nanoseconds (fields ending in ``_ns``), sizes bytes
(``_bytes``), times RFC 3339 strings.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Type, TypeVar

T = TypeVar("T")


def _name(f: dataclasses.Field) -> str:
    return f.metadata.get("json", f.name)


def _hints(cls: type) -> Dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


def _decode(tp: Any, value: Any) -> Any:
    """Decode value (a JSON value) as type tp."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _decode(inner[0], value) if inner else value
    if origin in (list, List):
        return [_decode(args[0], v) for v in value] if args else list(value)
    if origin in (dict, Dict):
        return {k: _decode(args[1], v) for k, v in value.items()} if args else dict(value)
    if dataclasses.is_dataclass(tp):
        return from_json(tp, value)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


def from_json(cls: Type[T], data: Dict[str, Any]) -> T:
    """Build dataclass cls from a decoded JSON object; unknown keys are ignored."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = _name(f)
        if key in data:
            kwargs[f.name] = _decode(hints[f.name], data[key])
    return cls(**kwargs)  # type: ignore[call-arg]


def _zero(v: Any) -> bool:
    if v is None or v is False or v == 0 or v == "" or v == [] or v == {}:
        return True
    if dataclasses.is_dataclass(v):
        return all(_zero(getattr(v, f.name)) for f in dataclasses.fields(v))
    return False


def to_json(obj: Any, *, keep_zero: bool = False) -> Any:
    """The JSON form of a dataclass (zero fields left out) or plain value."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if not keep_zero and _zero(v):
                continue
            out[_name(f)] = to_json(v, keep_zero=keep_zero)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_json(v, keep_zero=keep_zero) for v in obj]
    if isinstance(obj, dict):
        return {k: to_json(v, keep_zero=keep_zero) for k, v in obj.items()}
    return obj


def _j(name: str, **kw: Any) -> Any:
    """A field with JSON name ``name``."""
    return field(metadata={"json": name}, **kw)


# Sandboxes ------------------------------------------------------------------


@dataclass
class Limits:
    """A sandbox's resource bounds; 0 means the daemon's default."""

    memory_bytes: int = 0
    pids: int = 0
    cpus: float = 0.0
    tmp_bytes: int = 0
    disk_bytes: int = 0


@dataclass
class SandboxInfo:
    """A sandbox of the daemon: live (state ``running``) or closed recently
    (``closed``, or ``reaped`` with ``reason`` lifetime or idle_timeout)."""

    id: str = ""
    instance_id: str = ""
    labels: Dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    mode: str = ""
    created_at: str = ""
    sessions: List[str] = field(default_factory=list)
    state: str = ""
    reason: str = ""
    lifetime_ns: int = 0
    idle_timeout_ns: int = 0
    expires_at: str = ""
    last_active_at: str = ""
    closed_at: str = ""


@dataclass
class ExecResult:
    """What one command did. ``stdout`` holds stderr merged in, in the order
    written, unless the request asked for separate streams."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    duration_ns: int = 0
    truncated: bool = False
    timed_out: bool = False
    session_ended: bool = False
    #: an interactive command has not completed yet (``exit_code`` means
    #: nothing yet); with ``timed_out``, ``stdout`` is what it printed so far
    running: bool = False
    #: the expect pattern whose match ended the wait
    matched: str = ""

    @property
    def ok(self) -> bool:
        """The command exited 0 within its timeout."""
        return self.exit_code == 0 and not self.timed_out


@dataclass
class ExecEvent:
    """One event of a streaming exec: ``stdout``/``stderr`` output as it
    comes, then exactly one ``result`` (or ``error``)."""

    type: str = ""
    data: str = ""
    result: Optional[ExecResult] = None
    error: Optional["ErrorInfo"] = None


@dataclass
class ErrorInfo:
    """The ``error`` object of an API error body."""

    code: str = ""
    message: str = ""
    request_id: str = ""


@dataclass
class FileEntry:
    """One directory entry inside a sandbox (type: file, dir, symlink, other)."""

    name: str = ""
    type: str = ""
    size: int = 0
    mode: int = 0
    target: str = ""
    mtime: int = 0
    uid: int = 0
    gid: int = 0


@dataclass
class FileList:
    """A directory's entries."""

    path: str = ""
    entries: List[FileEntry] = field(default_factory=list)


@dataclass
class FileWritten:
    """Answer to a file or tar upload."""

    path: str = ""
    bytes: int = 0


# Daemon ---------------------------------------------------------------------


@dataclass
class Enforcement:
    """What enforces each limit on this daemon's host."""

    memory: str = ""
    pids: str = ""
    cpu: str = ""
    tmp: str = ""
    disk: str = ""
    #: what a sandbox can read of the host's files
    host_files: str = ""


@dataclass
class Quota:
    """What the daemon admits at once and what is taken now (0: no bound)."""

    max_sandboxes: int = 0
    sandboxes: int = 0
    memory_bytes: int = 0
    memory_used_bytes: int = 0
    disk_bytes: int = 0
    disk_used_bytes: int = 0
    max_body_bytes: int = 0
    max_admission_wait_ns: int = 0
    #: evaluation sandboxes the budgets keep room for, that agents' cannot take
    grading_reserve: int = 0


@dataclass
class Health:
    """GET /v1/health: status ``ok`` or ``shutting_down``."""

    status: str = ""
    version: str = ""
    mode: str = ""
    uptime_ns: int = 0
    sandboxes: int = 0
    enforcement: Enforcement = field(default_factory=Enforcement)
    quota: Quota = field(default_factory=Quota)


# Evaluation -----------------------------------------------------------------


@dataclass
class Outcomes:
    """Which tests of one list succeeded and which failed."""

    success: List[str] = field(default_factory=list)
    failure: List[str] = field(default_factory=list)


@dataclass
class TestsStatus:
    """The harness's tests_status object."""

    __test__ = False  # not a pytest class

    fail_to_pass: Outcomes = _j("FAIL_TO_PASS", default_factory=Outcomes)
    pass_to_pass: Outcomes = _j("PASS_TO_PASS", default_factory=Outcomes)
    fail_to_fail: Outcomes = _j("FAIL_TO_FAIL", default_factory=Outcomes)
    pass_to_fail: Outcomes = _j("PASS_TO_FAIL", default_factory=Outcomes)


@dataclass
class InstanceReport:
    """One instance's entry of the harness's report.json."""

    patch_is_none: bool = _j("patch_is_None", default=False)
    patch_exists: bool = False
    patch_successfully_applied: bool = False
    resolved: bool = False
    tests_status: Optional[TestsStatus] = None
    #: the tamper checks' verdict on the model patch ("" when none was checked)
    integrity: str = ""
    integrity_reasons: List[str] = field(default_factory=list)
    #: which checks did not run, and why
    integrity_notes: List[str] = field(default_factory=list)
    #: a repeated evaluation did not give the same statuses every time
    flaky: bool = False
    flaky_tests: List[str] = field(default_factory=list)


@dataclass
class Timings:
    """An evaluation's phases, in nanoseconds."""

    env_ns: int = 0
    task_ready_ns: int = 0
    patch_ns: int = 0
    tests_ns: int = 0
    grading_ns: int = 0
    total_ns: int = 0
    #: the integrity canary's sandbox, opened to closed (beside the tests
    #: or after them); CPU time of the evaluation's sandboxes and the
    #: canary's share, where a cgroup accounts it (0: unknown)
    canary_ns: int = 0
    cpu_ns: int = 0
    canary_cpu_ns: int = 0


#: Outcomes that are verdicts on the patch; the others say it could not be
#: judged (an infrastructure error, a timeout, a patch that does not apply)
#: or, for ``empty_patch``, was not.
VERDICTS = ("resolved", "unresolved")


@dataclass
class EvalResult:
    """One evaluation of one patch on one instance, graded with SWE-bench's
    rules in a fresh sandbox. ``outcome`` is resolved, unresolved,
    patch_apply_failed, empty_patch, test_timeout, env_build_failed or
    infra_error; ``detail`` says why for all but the first two."""

    instance_id: str = ""
    model: str = _j("model_name_or_path", default="")
    outcome: str = ""
    detail: str = ""
    resolution: str = ""
    reward: float = 0.0
    #: a repeated evaluation could not pin the reward down: mask it
    flaky: bool = False
    #: how many times the tests ran (0: once)
    runs: int = 0
    apply_method: str = ""
    test_exit_code: Optional[int] = None
    report: InstanceReport = field(default_factory=InstanceReport)
    patch_digest: str = ""
    spec_digest: str = ""
    #: the grading sandbox's network (none, host)
    network: str = ""
    timings: Timings = field(default_factory=Timings)
    resumed: bool = False

    @property
    def resolved(self) -> bool:
        """The patch resolves the instance (SWE-bench's RESOLVED_FULL)."""
        return self.outcome == "resolved"

    @property
    def is_verdict(self) -> bool:
        """The evaluation judged the patch (resolved or unresolved)."""
        return self.outcome in VERDICTS


@dataclass
class EvalArtifacts:
    """The files of an evaluation, as the harness names them ("" = not made)."""

    patch: str = ""
    eval_script: str = ""
    test_output: str = ""
    run_log: str = ""
    ran: bool = False
    patch_written: bool = False
    script_written: bool = False
    tests_ran: bool = False


@dataclass
class EvaluateResponse:
    """POST /v1/sandboxes/{id}/evaluate."""

    result: EvalResult = field(default_factory=EvalResult)
    artifacts: Optional[EvalArtifacts] = None


@dataclass
class Prediction:
    """One row of a predictions file; ``model_patch`` None is a JSON null."""

    instance_id: str = ""
    model: str = _j("model_name_or_path", default="")
    model_patch: Optional[str] = None

    def to_wire(self) -> Dict[str, Any]:
        """The harness's row (every field present, null patch kept)."""
        return {"instance_id": self.instance_id, "model_name_or_path": self.model, "model_patch": self.model_patch}


@dataclass
class RunSummary:
    """The harness's run summary for one model, plus msb's outcomes."""

    model: str = _j("model_name_or_path", default="")
    run_id: str = ""
    total_instances: int = 0
    submitted_instances: int = 0
    completed_instances: int = 0
    resolved_instances: int = 0
    unresolved_instances: int = 0
    infra_failure_instances: int = 0
    empty_patch_instances: int = 0
    error_instances: int = 0
    completed_ids: List[str] = field(default_factory=list)
    incomplete_ids: List[str] = field(default_factory=list)
    empty_patch_ids: List[str] = field(default_factory=list)
    submitted_ids: List[str] = field(default_factory=list)
    resolved_ids: List[str] = field(default_factory=list)
    unresolved_ids: List[str] = field(default_factory=list)
    infra_failure_ids: List[str] = field(default_factory=list)
    failure_reasons: Dict[str, str] = field(default_factory=dict)
    error_ids: List[str] = field(default_factory=list)
    schema_version: int = 0
    outcomes: Dict[str, List[str]] = field(default_factory=dict)
    skipped_rows: int = 0


@dataclass
class RunReport:
    """A batch evaluation: a summary per model, every result, the files."""

    run_id: str = ""
    summaries: List[RunSummary] = field(default_factory=list)
    results: List[EvalResult] = field(default_factory=list)
    resumed: int = 0
    files: Dict[str, str] = field(default_factory=dict)
    interrupted: bool = False


@dataclass
class Validation:
    """Whether one instance is admitted: its gold patch resolves and an
    empty patch does not."""

    instance_id: str = ""
    valid: bool = False
    reason: str = ""
    errored: bool = False
    #: the gold patch resolved only with the host's network (and failed
    #: again on a second run without it)
    needs_network: bool = False
    #: the gold patch failed, then resolved on a second run without network
    flaky: bool = False
    #: the tests whose status changed between those two runs
    flaky_tests: List[str] = field(default_factory=list)
    gold: EvalResult = field(default_factory=EvalResult)
    empty: EvalResult = field(default_factory=EvalResult)


@dataclass
class ValidationReport:
    """A validation run: valid.json and invalid.json, and every validation."""

    run_id: str = ""
    validations: List[Validation] = field(default_factory=list)
    valid: List[str] = field(default_factory=list)
    invalid: Dict[str, str] = field(default_factory=dict)
    errored: List[str] = field(default_factory=list)
    #: instances whose gold patch was evaluated again with the host's network
    network_rechecked: List[str] = field(default_factory=list)
    #: those of them evaluated once more without network (resolved with it)
    offline_rechecked: List[str] = field(default_factory=list)
    skipped_rows: int = 0
    files: Dict[str, str] = field(default_factory=dict)
    interrupted: bool = False


@dataclass
class Job:
    """A batch run on the daemon (kind evaluation or validation; state
    running, done, failed or cancelled)."""

    id: str = ""
    kind: str = ""
    run_id: str = ""
    state: str = ""
    done: int = 0
    total: int = 0
    created_at: str = ""
    finished_at: str = ""
    error: str = ""
    out_dir: str = ""
    results: List[EvalResult] = field(default_factory=list)
    report: Optional[RunReport] = None
    validation: Optional[ValidationReport] = None

    @property
    def finished(self) -> bool:
        """The job is no longer running."""
        return self.state != "running"


@dataclass
class Reuse:
    """Whether results an earlier run stored stand for a run's evaluations
    of one instance; ``stale``: the models to evaluate again; ``dirs``: where
    a run keeps each model's results of the instance, relative to the run's
    output directory (``<out>/<run id>``)."""

    reusable: bool = False
    stale: List[str] = field(default_factory=list)
    dirs: Dict[str, str] = field(default_factory=dict)


# Instances ------------------------------------------------------------------


@dataclass
class InstanceInfo:
    """A known instance: what an agent is told and how it is tested."""

    instance_id: str = ""
    repo: str = ""
    base_commit: str = ""
    version: str = ""
    problem_statement: str = ""
    fail_to_pass: List[str] = _j("FAIL_TO_PASS", default_factory=list)
    pass_to_pass: List[str] = _j("PASS_TO_PASS", default_factory=list)
    #: the resolved spec (docs/spec-format.md), as a decoded JSON object
    spec: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LayerStatus:
    """One layer of an instance's task in one daemon's cache: the ref that
    names it on every node, the layer it points at here, whether it is here."""

    ref: str = ""
    layer: str = ""
    present: bool = False


@dataclass
class InstanceLayers:
    """The layers a task sandbox of an instance is made of (environment,
    then repository commit) and which the daemon's cache holds."""

    instance_id: str = ""
    layers: List[LayerStatus] = field(default_factory=list)
    present: bool = False

    def missing(self) -> List[str]:
        """Refs of the layers this cache lacks."""
        return [layer.ref for layer in self.layers if not layer.present]


@dataclass
class InstancesLoaded:
    """Answer to a dataset load or added rows."""

    instance_ids: List[str] = field(default_factory=list)
    row_errors: List[str] = field(default_factory=list)


# Gym ------------------------------------------------------------------------


@dataclass
class GymObservation:
    """What a gym reset returns: the task and where to act."""

    sandbox_id: str = ""
    instance_id: str = ""
    problem_statement: str = ""
    cwd: str = ""
    session: str = ""


@dataclass
class GymStep:
    """A step's observation; ``done`` once the agent submitted or the shell exited."""

    observation: ExecResult = field(default_factory=ExecResult)
    done: bool = False


@dataclass
class GymSubmitResult:
    """The reward of an episode, graded in a fresh sandbox."""

    reward: float = 0.0
    outcome: str = ""
    done: bool = True
    result: EvalResult = field(default_factory=EvalResult)
    #: the repeated tests disagreed (``repeat``): mask the reward
    flaky: bool = False


#: The first line of a command's output that, with exit code 0, submits the
#: agent's work (mini-swe-agent's convention; the gym routes use it too).
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


# Snapshots ------------------------------------------------------------------


@dataclass
class SnapshotSession:
    """A session as a snapshot recorded it: the shell's cwd and environment
    (NAME=value), with which a fork or a rollback reopens it."""

    name: str = ""
    cwd: str = ""
    env: List[str] = field(default_factory=list)


@dataclass
class SnapshotInfo:
    """A snapshot: what a sandbox wrote, as one immutable layer (``layer``,
    its digest) over the sandbox's own layers, and its sessions' state.
    ``name`` is empty for an anonymous snapshot."""

    name: str = ""
    layer: str = ""
    sandbox: str = ""
    instance_id: str = ""
    created_at: str = ""
    bytes: int = 0
    files: int = 0
    sessions: List[SnapshotSession] = field(default_factory=list)
