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

    code = "bad_request"


class PathEscape(BadRequest):
    """400: a file path that leaves the sandbox root."""

    code = "path_escape"


class Unauthorized(APIError):
    """401: TCP without the right token."""

    code = "unauthorized"


class NotFound(APIError):
    """404: no such sandbox, session, instance, file, job or layer."""

    code = "not_found"


class MethodNotAllowed(APIError):
    """405."""

    code = "method_not_allowed"


class Conflict(APIError):
    """409: a session name already in use."""

    code = "conflict"


class SessionEnded(Conflict):
    """409: the session's shell exited (exit, exec, set -e); open a new one."""

    code = "session_ended"


class NoInstance(Conflict):
    """409: diff, evaluate or a gym step on a sandbox made from raw layers."""

    code = "no_instance"


class SandboxGone(APIError):
    """410: the sandbox was closed or reaped; the message says when and why."""

    code = "sandbox_gone"


class BodyTooLarge(APIError):
    """413: the request body exceeds the daemon's --max-body."""

    code = "body_too_large"


class QuotaExceeded(APIError):
    """429: no room now (live sandboxes, memory or disk); ``retry_after``
    says when to retry, or ask the daemon to wait with ``admission_wait``."""

    code = "quota_exceeded"


class InternalError(APIError):
    """500: a failure of msb or the host; the message says what failed."""

    code = "internal"


class Unavailable(APIError):
    """503: the daemon is shutting down."""

    code = "unavailable"


class InsufficientStorage(APIError):
    """507: the request can never fit (a limit above the whole budget)."""

    code = "insufficient_storage"


class Submitted(MsbError):
    """The agent submitted: a command's first output line was the submit
    marker and it exited 0. ``output`` is the rest of the output (the
    patch, by the convention of mini-swe-agent's prompts)."""

    def __init__(self, output: str) -> None:
        super().__init__("submitted")
        self.output = output


def _all(cls: Type[APIError]) -> Dict[str, Type[APIError]]:
    out = {cls.code: cls} if cls.code else {}
    for sub in cls.__subclasses__():
        out.update(_all(sub))
    return out


#: error code -> class
BY_CODE: Dict[str, Type[APIError]] = _all(APIError)

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
