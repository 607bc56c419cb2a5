"""HTTP/1.1 to msb serve over a unix socket, TCP or TLS, with the standard library.

An ``Address`` says where the daemon listens; ``default_address`` finds it
the way the CLI does (docs/api.md "Connecting"). An ``https://`` address
(``msb serve --tls-cert``) is verified against a ``ca_file``, else the
system's CA store or SSL_CERT_FILE's (``tls_context``). A ``Call`` is one
request and how to read its answer; ``SyncTransport`` runs calls on ``http.client``
connections kept alive per thread, ``AsyncTransport`` on asyncio streams
(a small HTTP/1.1 reader: Content-Length, chunked, or read to close) kept
in a pool. Both raise the exceptions of ``msb.errors``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import ssl
import stat
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import errors

USER_AGENT = "msb-python/0.1"


@dataclass(frozen=True)
class Address:
    """Where a daemon listens: a unix socket ``path``, or TCP ``host``:``port``
    (over TLS when ``tls``)."""

    path: str = ""
    host: str = ""
    port: int = 0
    tls: bool = False

    @property
    def is_unix(self) -> bool:
        """The address is a unix socket."""
        return bool(self.path)

    def url(self) -> str:
        """The address as MSB_SOCKET takes it."""
        if self.path:
            return f"unix://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> "Address":
        """Parse a socket path, a ``unix://`` URL, or an ``http://host:port``
        or ``https://host:port`` URL (port 80 or 443 when left out)."""
        text = text.strip()
        if text.startswith("unix://"):
            return cls(path=text[len("unix://"):])
        if text.startswith(("http://", "tcp://")):
            u = urllib.parse.urlsplit(text)
            if not u.hostname:
                raise ValueError(f"daemon address {text!r}: no host")
            return cls(host=u.hostname, port=u.port or 80)
        if text.startswith("https://"):
            u = urllib.parse.urlsplit(text)
            if not u.hostname:
                raise ValueError(f"daemon address {text!r}: no host")
            return cls(host=u.hostname, port=u.port or 443, tls=True)
        if "://" in text:
            raise ValueError(f"daemon address {text!r}: want a socket path, unix://PATH, "
                             "http://HOST:PORT or https://HOST:PORT")
        return cls(path=text)


def default_socket(env: Mapping[str, str] = os.environ, uid: Optional[int] = None) -> str:
    """The daemon's default socket path, as ``msb serve`` chooses it:
    /run/msb/msb.sock for root, else $XDG_RUNTIME_DIR/msb.sock, else
    /tmp/msb-<uid>/msb.sock."""
    uid = os.geteuid() if uid is None else uid
    if uid == 0:
        return "/run/msb/msb.sock"
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if xdg:
        return os.path.join(xdg, "msb.sock")
    return f"/tmp/msb-{uid}/msb.sock"


def default_address(env: Mapping[str, str] = os.environ) -> Address:
    """MSB_SOCKET (a path, unix://, http:// or https:// URL) if set, else the default socket."""
    given = env.get("MSB_SOCKET", "")
    if given:
        return Address.parse(given)
    path = default_socket(env)
    check_private_dir(os.path.dirname(path), os.geteuid())
    return Address(path=path)


def check_private_dir(path: str, uid: int) -> None:
    """Refuse the default /tmp/msb-<uid> when another user could have made
    it (as msb serve does): it must be uid's own directory with mode 0700."""
    if path != f"/tmp/msb-{uid}":
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or stat.S_IMODE(st.st_mode) != 0o700:
        raise ValueError(f"unsafe socket directory {path}: owned by uid {st.st_uid} with mode "
                         f"{stat.S_IMODE(st.st_mode):04o}; it must be uid {uid}'s with mode 0700 "
                         "(remove it, or set XDG_RUNTIME_DIR)")


def default_token(env: Mapping[str, str] = os.environ) -> str:
    """MSB_TOKEN, else the first line of the file MSB_TOKEN_FILE names, else ""."""
    if env.get("MSB_TOKEN"):
        return env["MSB_TOKEN"]
    path = env.get("MSB_TOKEN_FILE", "")
    return read_token_file(path) if path else ""


def read_token_file(path: str) -> str:
    """The token in a token file: its first line, stripped."""
    with open(path, encoding="utf-8") as f:
        return f.readline().strip()


def resolve_endpoint(address: Union[str, "Address", None], token: Optional[str],
                     token_file: Optional[str]) -> Tuple["Address", str]:
    """The daemon's address and token as a client's arguments give them:
    the address (a path or URL, or the default) and the token (given, from
    token_file, or the default)."""
    if address is None:
        addr = default_address()
    elif isinstance(address, Address):
        addr = address
    else:
        addr = Address.parse(address)
    if token is None:
        token = read_token_file(token_file) if token_file else default_token()
    return addr, token


def tls_context(ca_file: Optional[str] = None) -> ssl.SSLContext:
    """The TLS settings of a client of an https:// daemon: the certificate
    and its host name verified against ca_file's CAs if given, else the
    system's store (or SSL_CERT_FILE's, SSL_CERT_DIR's); HTTP/1.1 by ALPN
    (the daemon offers HTTP/2 too, which this client does not speak)."""
    try:
        ctx = ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"ca_file {ca_file!r}: cannot load it as PEM CA certificates: {e}") from None
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def unreachable_hint(address: Address, e: BaseException) -> str:
    """What to do about a failed connection, as far as the error tells."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return (" (the daemon's TLS certificate is not trusted: pass its CA as ca_file=, "
                "or set SSL_CERT_FILE to it)")
    if isinstance(e, ssl.SSLError):
        return " (does the daemon serve TLS there? msb serve --tls-cert; else use http://)"
    if address.is_unix and isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
        return " (is `msb serve` running? set MSB_SOCKET to its --listen)"
    return ""


Parse = Callable[[int, Mapping[str, str], bytes], Any]


@dataclass
class Call:
    """One request: method, path (with its query), body, and how to read a
    successful answer (``parse(status, headers, body)``)."""

    method: str
    path: str
    parse: Parse
    body: Optional[bytes] = None
    content_type: str = ""
    accept: str = "application/json"
    #: seconds the client waits for the answer; None waits as long as it takes
    timeout: Optional[float] = None
    headers: Dict[str, str] = field(default_factory=dict)

    def header_list(self, token: str, host: str) -> List[Tuple[str, str]]:
        """Every header of the request."""
        h = [("Host", host), ("User-Agent", USER_AGENT), ("Accept", self.accept)]
        if token:
            h.append(("Authorization", f"Bearer {token}"))
        if self.body is not None:
            h.append(("Content-Type", self.content_type or "application/json"))
            h.append(("Content-Length", str(len(self.body))))
        elif self.method in ("POST", "PUT"):
            h.append(("Content-Length", "0"))
        h.extend(self.headers.items())
        return h


def json_body(obj: Any) -> bytes:
    """A request body as the daemon reads it."""
    return json.dumps(obj, separators=(",", ":")).encode()


def decode_json(body: bytes) -> Any:
    """A JSON answer, or ProtocolError."""
    try:
        return json.loads(body)
    except ValueError as e:
        raise errors.ProtocolError(f"daemon answered invalid JSON ({e}): {body[:200]!r}") from None


def raise_for(status: int, headers: Mapping[str, str], body: bytes) -> None:
    """Raise the API's exception for an error answer (status >= 400)."""
    if status < 400:
        return
    try:
        decoded: Any = json.loads(body) if body else ""
    except ValueError:
        decoded = body.decode("utf-8", "replace")
    retry = headers.get("retry-after")
    try:
        retry_after = float(retry) if retry else None
    except ValueError:
        retry_after = None
    raise errors.from_response(status, decoded, retry_after=retry_after)


def _sock_timeout(t: Optional[float]) -> Optional[float]:
    return None if t is None else max(t, 0.001)


# Synchronous ----------------------------------------------------------------


class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix socket."""

    def __init__(self, path: str, timeout: Optional[float] = None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


# ssl.SSLEOFError: a kept TLS connection the daemon closed without close_notify.
_RETRYABLE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
              http.client.CannotSendRequest, http.client.BadStatusLine, ssl.SSLEOFError)


class SyncTransport:
    """Runs calls on keep-alive connections, one per thread (over TLS for an
    https:// address, verified as ``tls_context(ca_file)`` says)."""

    def __init__(self, address: Address, token: str = "", ca_file: Optional[str] = None) -> None:
        self.address = address
        self.token = token
        self._local = threading.local()
        self._host = "localhost" if address.is_unix else f"{address.host}:{address.port}"
        self._ssl = tls_context(ca_file) if address.tls else None

    def _new(self) -> http.client.HTTPConnection:
        if self.address.is_unix:
            return _UnixHTTPConnection(self.address.path)
        if self._ssl is not None:
            return http.client.HTTPSConnection(self.address.host, self.address.port, context=self._ssl)
        return http.client.HTTPConnection(self.address.host, self.address.port)

    def _unreachable(self, e: OSError) -> errors.DaemonUnreachable:
        hint = unreachable_hint(self.address, e)
        return errors.DaemonUnreachable(f"msb daemon at {self.address.url()}: {e}{hint}")

    def _send(self, call: Call) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send call, on the thread's connection if it is alive, else on a
        new one; a kept connection the daemon closed meanwhile is replaced
        once (nothing of the request reached the daemon then)."""
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = self._new()
                self._local.conn = conn
            try:
                if conn.sock is None:
                    conn.timeout = _sock_timeout(call.timeout)
                    conn.connect()
                else:
                    conn.sock.settimeout(_sock_timeout(call.timeout))
                conn.putrequest(call.method, call.path, skip_host=True, skip_accept_encoding=True)
                for k, v in call.header_list(self.token, self._host):
                    conn.putheader(k, v)
                conn.endheaders(call.body)
                return conn, conn.getresponse()
            except _RETRYABLE as e:
                self.close()
                if reused and attempt == 0:
                    continue
                raise self._unreachable(e) from None
            except socket.timeout:
                self.close()
                raise errors.RequestTimeout(f"{call.method} {call.path}: no answer in {call.timeout}s") from None
            except OSError as e:
                self.close()
                raise self._unreachable(e) from None
        raise AssertionError("unreachable")

    def run(self, call: Call) -> Any:
        """Send call and return its parsed answer, or raise the API's error."""
        conn, resp = self._send(call)
        try:
            body = resp.read()
        except socket.timeout:
            self.close()
            raise errors.RequestTimeout(f"{call.method} {call.path}: no answer in {call.timeout}s") from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise errors.ProtocolError(f"reading the answer to {call.method} {call.path}: {e}") from None
        headers = {k.lower(): v for k, v in resp.getheaders()}
        if resp.will_close:
            self.close()
        raise_for(resp.status, headers, body)
        return call.parse(resp.status, headers, body)

    def stream(self, call: Call) -> Iterator[bytes]:
        """Send call and yield its answer line by line (NDJSON)."""
        conn, resp = self._send(call)
        headers = {k.lower(): v for k, v in resp.getheaders()}
        if resp.status >= 400:
            body = resp.read()
            raise_for(resp.status, headers, body)
        complete = False
        try:
            while True:
                line = resp.readline()
                if not line:
                    complete = True
                    break
                if line.strip():
                    yield line
        finally:
            # A stream left early (the caller stopped iterating) leaves
            # unread data: the connection cannot be reused.
            if not complete or resp.will_close:
                self.close()

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()


# Asynchronous ---------------------------------------------------------------


class _AsyncConn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


async def _read_headers(r: asyncio.StreamReader) -> Tuple[int, Dict[str, str]]:
    line = await r.readline()
    if not line:
        raise ConnectionResetError("connection closed before the status line")
    parts = line.decode("latin-1").split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise errors.ProtocolError(f"bad status line {line[:100]!r}")
    status = int(parts[1])
    headers: Dict[str, str] = {}
    while True:
        h = await r.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


async def _body_chunks(r: asyncio.StreamReader, status: int, headers: Mapping[str, str]) -> AsyncIterator[bytes]:
    """The body's bytes as they come: chunked, by Content-Length, or to EOF;
    none for a status that has no body (204, 304, 1xx), which comes without
    Content-Length on a connection kept alive."""
    if status in (204, 304) or status < 200:
        return
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await r.readline()
            if not size_line:
                raise errors.ProtocolError("connection closed inside a chunked body")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await r.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield await r.readexactly(size)
            await r.readexactly(2)
    elif "content-length" in headers:
        n = int(headers["content-length"])
        if n:
            yield await r.readexactly(n)
    else:
        while True:
            b = await r.read(65536)
            if not b:
                return
            yield b


def _reusable(headers: Mapping[str, str]) -> bool:
    if headers.get("connection", "").lower() == "close":
        return False
    return "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()


class AsyncTransport:
    """Runs calls on a pool of asyncio connections (one event loop; over
    TLS for an https:// address, verified as ``tls_context(ca_file)`` says)."""

    def __init__(self, address: Address, token: str = "", max_idle: int = 16,
                 ca_file: Optional[str] = None) -> None:
        self.address = address
        self.token = token
        self.max_idle = max_idle
        self._idle: List[_AsyncConn] = []
        self._host = "localhost" if address.is_unix else f"{address.host}:{address.port}"
        self._ssl = tls_context(ca_file) if address.tls else None

    async def _connect(self) -> _AsyncConn:
        try:
            if self.address.is_unix:
                r, w = await asyncio.open_unix_connection(self.address.path, limit=1 << 22)
            else:
                r, w = await asyncio.open_connection(self.address.host, self.address.port, ssl=self._ssl,
                                                     limit=1 << 22)
        except OSError as e:
            hint = unreachable_hint(self.address, e)
            raise errors.DaemonUnreachable(f"msb daemon at {self.address.url()}: {e}{hint}") from None
        return _AsyncConn(r, w)

    async def _send(self, call: Call) -> Tuple[_AsyncConn, int, Dict[str, str]]:
        head = f"{call.method} {call.path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in call.header_list(self.token, self._host)) + "\r\n"
        data = head.encode("latin-1") + (call.body or b"")
        for attempt in (0, 1):
            # The retry always connects afresh: the pooled connections
            # left were opened to the same daemon and closed with it.
            reused = attempt == 0 and bool(self._idle)
            conn = self._idle.pop() if reused else await self._connect()
            try:
                conn.writer.write(data)
                await conn.writer.drain()
                status, headers = await _read_headers(conn.reader)
                return conn, status, headers
            except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError, ssl.SSLEOFError) as e:
                conn.close()
                if reused:
                    self._drop_idle()
                    continue
                raise errors.DaemonUnreachable(f"msb daemon at {self.address.url()}: {e}") from None
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def _drop_idle(self) -> None:
        """Close every pooled connection: one of them found the daemon gone
        (a restart closes them all)."""
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def _release(self, conn: _AsyncConn, headers: Mapping[str, str]) -> None:
        if _reusable(headers) and len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            conn.close()

    async def run(self, call: Call) -> Any:
        """Send call and return its parsed answer, or raise the API's error."""
        async def go() -> Any:
            conn, status, headers = await self._send(call)
            try:
                body = b"".join([c async for c in _body_chunks(conn.reader, status, headers)])
            except BaseException:
                conn.close()
                raise
            self._release(conn, headers)
            raise_for(status, headers, body)
            return call.parse(status, headers, body)
        if call.timeout is None:
            return await go()
        try:
            return await asyncio.wait_for(go(), call.timeout)
        except asyncio.TimeoutError:
            raise errors.RequestTimeout(f"{call.method} {call.path}: no answer in {call.timeout}s") from None

    async def stream(self, call: Call) -> AsyncIterator[bytes]:
        """Send call and yield its answer line by line (NDJSON)."""
        conn, status, headers = await self._send(call)
        complete = False
        try:
            if status >= 400:
                body = b"".join([c async for c in _body_chunks(conn.reader, status, headers)])
                complete = True
                raise_for(status, headers, body)
            buf = b""
            async for chunk in _body_chunks(conn.reader, status, headers):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield line
            if buf.strip():
                yield buf
            complete = True
        finally:
            if complete:
                self._release(conn, headers)
            else:
                conn.close()

    async def close(self) -> None:
        """Close every pooled connection."""
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
            try:
                await c.writer.wait_closed()
            except OSError:
                pass
