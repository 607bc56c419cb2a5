"""One exception hierarchy for every failure the client reports.

``MsbError`` is the root. ``APIError`` and its subclasses are the daemon's
errors, one class per stable ``code`` of docs/api.md (the class is chosen by
the code, never by the message); ``DaemonUnreachable`` is a daemon that
cannot be reached at all; ``ProtocolError`` an answer that is not what the
API promises. ``Submitted`` is not a failure but the end of an agent's
episode, raised by the environments that follow mini-swe-agent's
convention.
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class MsbError(Exception):
    """Root of every exception raised by the msb client."""


class DaemonUnreachable(MsbError):
    """The daemon's socket or address does not answer (not running, wrong
    path, no permission on the socket)."""


class RequestTimeout(MsbError, TimeoutError):
    """The daemon did not answer within the client's wait for the request
    (a command's own timeout is no error: its result says ``timed_out``)."""


class ProtocolError(MsbError):
    """The daemon's answer is not what the API promises (malformed JSON,
    an unexpected status)."""


class APIError(MsbError):
    """An error answered by the daemon: ``code`` is its stable class,
    ``status`` the HTTP status, ``request_id`` what the daemon logged it
    under."""

    code = ""

    def __init__(self, message: str, *, code: str = "", status: int = 0, request_id: str = "",
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.status = status
        self.request_id = request_id
        #: seconds, from Retry-After (quota_exceeded)
        self.retry_after = retry_after

    def __str__(self) -> str:
        rid = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.code or self.status}: {self.message}{rid}"


class BadRequest(APIError):
    """400: malformed body, an unknown or invalid field; the message names it."""


class InvalidConfig(BadRequest):
    """400: a sandbox configuration that cannot be built (a layer or bind
    that is not there, a relative path); the message names it."""


class PathEscape(BadRequest):
    """400: a file path that leaves the sandbox root."""


class Unauthorized(APIError):
    """401: TCP without the right token."""


class NotFound(APIError):
    """404: no such sandbox, session, instance, file, job or layer."""


class MethodNotAllowed(APIError):
    """405."""


class Conflict(APIError):
    """409: a session name already in use."""


class SessionEnded(Conflict):
    """409: the session's shell exited (exit, exec, set -e); open a new one."""


class NoInstance(Conflict):
    """409: diff, evaluate or a gym step on a sandbox made from raw layers."""


class SandboxGone(APIError):
    """410: the sandbox was closed or reaped; the message says when and why."""


class BodyTooLarge(APIError):
    """413: the request body exceeds the daemon's --max-body."""


class QuotaExceeded(APIError):
    """429: no room now (live sandboxes, memory or disk); ``retry_after``
    says when to retry, or ask the daemon to wait with ``admission_wait``."""


class InternalError(APIError):
    """500: a failure of msb or the host; the message says what failed."""


class Unavailable(APIError):
    """503: the daemon is shutting down."""


class InsufficientStorage(APIError):
    """507: the request can never fit (a limit above the whole budget)."""


class Submitted(MsbError):
    """The agent submitted: a command's first output line was the submit
    marker and it exited 0. ``output`` is the rest of the output (the
    patch, by the convention of mini-swe-agent's prompts)."""

    def __init__(self, output: str) -> None:
        super().__init__("submitted")
        self.output = output


#: error code -> class: the one map from the daemon's error codes
#: (docs/api.md "Errors") to exceptions. A Go test (internal/cli) checks
#: that it names a class for every code the daemon has.
BY_CODE: Dict[str, Type[APIError]] = {
    "bad_request": BadRequest,
    "path_escape": PathEscape,
    "invalid_config": InvalidConfig,
    "unauthorized": Unauthorized,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "session_ended": SessionEnded,
    "no_instance": NoInstance,
    "sandbox_gone": SandboxGone,
    "body_too_large": BodyTooLarge,
    "quota_exceeded": QuotaExceeded,
    "internal": InternalError,
    "unavailable": Unavailable,
    "insufficient_storage": InsufficientStorage,
}
for _code, _cls in BY_CODE.items():
    _cls.code = _code  # the code an exception made in Python says

#: status -> class, for an unknown code (a newer daemon's) or a body that
#: is not the API's; the Go test checks each is the class of its status's
#: codes or a base of them.
_BY_STATUS: Dict[int, Type[APIError]] = {
    400: BadRequest, 401: Unauthorized, 404: NotFound, 405: MethodNotAllowed, 409: Conflict,
    410: SandboxGone, 413: BodyTooLarge, 429: QuotaExceeded, 500: InternalError,
    503: Unavailable, 507: InsufficientStorage,
}


def from_response(status: int, body: object, *, retry_after: Optional[float] = None) -> APIError:
    """The exception for an error answer: by its ``error.code``, else (a
    body that is not the API's, e.g. a proxy's) by the HTTP status."""
    info = body.get("error") if isinstance(body, dict) else None
    if isinstance(info, dict):
        code = str(info.get("code", ""))
        cls = BY_CODE.get(code) or _BY_STATUS.get(status, APIError)
        return cls(str(info.get("message", "")), code=code, status=status,
                   request_id=str(info.get("request_id", "")), retry_after=retry_after)
    text = body if isinstance(body, str) else repr(body)
    cls = _BY_STATUS.get(status, APIError)
    return cls(f"HTTP {status}: {text[:500]}", status=status, retry_after=retry_after)
