"""Python client of MiniSandbox (``msb serve``).

The core (this package, ``msb.aio``) uses the standard library only: HTTP
over the daemon's unix socket, or TCP with a token. ``msb.Client`` is the
synchronous form, ``msb.aio.Client`` the asyncio one; both find the daemon
like the CLI does (MSB_SOCKET, else the default socket of a root or
rootless daemon).

Drop-in backends for agent harnesses, each an optional extra:
``msb.minisweagent`` (mini-swe-agent environment), ``msb.swerex`` (SWE-ReX
deployment for SWE-agent), ``msb.rllm`` (rLLM's Sandbox protocol),
``msb.harbor`` (Harbor-style environment), ``msb.gym`` (a gym-style
environment with msb's grading as reward), and ``msb.ray`` (one daemon per
Ray node, placement by cache affinity, batch evaluation over a cluster).
"""

from ._transport import Address, default_address, default_socket, default_token
from .client import Client, Sandbox, Session
from .errors import (APIError, BadRequest, BodyTooLarge, Conflict, DaemonUnreachable, InsufficientStorage,
                     InternalError, InvalidConfig, MethodNotAllowed, MsbError, NoInstance, NotFound, PathEscape,
                     ProtocolError, QuotaExceeded, RequestTimeout, SandboxGone, SessionEnded, Submitted, Unauthorized,
                     Unavailable)
from .types import (SUBMIT_MARKER, EvalArtifacts, EvalResult, EvaluateResponse, ExecEvent, ExecResult, FileEntry,
                    FileWritten, GymObservation, GymStep, GymSubmitResult, Health, InstanceInfo, InstanceReport,
                    InstancesLoaded, Job, Limits, Prediction, RunReport, RunSummary, SandboxInfo, SnapshotInfo,
                    SnapshotSession, Validation, ValidationReport)

__version__ = "0.1.0"

__all__ = [
    "Address", "Client", "Sandbox", "Session", "default_address", "default_socket", "default_token",
    "APIError", "BadRequest", "BodyTooLarge", "Conflict", "DaemonUnreachable", "InsufficientStorage",
    "InternalError", "InvalidConfig", "MethodNotAllowed", "MsbError", "NoInstance", "NotFound", "PathEscape",
    "ProtocolError", "QuotaExceeded", "RequestTimeout", "SandboxGone", "SessionEnded", "Submitted", "Unauthorized",
    "Unavailable",
    "SUBMIT_MARKER", "EvalArtifacts", "EvalResult", "EvaluateResponse", "ExecEvent", "ExecResult", "FileEntry",
    "FileWritten", "GymObservation", "GymStep", "GymSubmitResult", "Health", "InstanceInfo", "InstanceReport",
    "InstancesLoaded", "Job", "Limits", "Prediction", "RunReport", "RunSummary", "SandboxInfo", "SnapshotInfo",
    "SnapshotSession", "Validation", "ValidationReport",
]
