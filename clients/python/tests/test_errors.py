"""The client raises, for each error code of the daemon, the class its table
(``msb.errors.BY_CODE``) names. The codes and statuses come from
docs/api.md's "Errors" table, which a Go test (internal/cli) checks against
the daemon's codes, statuses and exit codes; an HTTP server on loopback
answers each with the daemon's error body, and the real client reads it.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, List, Tuple
from urllib.parse import unquote

import pytest

import msb
from msb import errors

DOCS = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def documented() -> List[Tuple[str, int]]:
    """(code, status) of every row of docs/api.md's Errors table."""
    text = DOCS.read_text()
    section = text[text.index("\n## Errors\n"):]
    section = section[:section.index("\n## ", 1)]
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", section, re.M)
    assert len(rows) >= 10, "the Errors table did not parse"
    return [(code, int(status)) for code, status in rows]


class _Answer(BaseHTTPRequestHandler):
    """Answers GET /v1/sandboxes/{code}/{status} with that error."""

    def do_GET(self) -> None:
        code, status = unquote(self.path).rsplit("/", 2)[1:]
        body = json.dumps({"error": {"code": code, "message": f"a {code}", "request_id": "r1"}}).encode()
        self.send_response(int(status))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def answering() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


@pytest.mark.parametrize("code,status", documented())
def test_client_raises_the_tables_class(answering: str, code: str, status: int) -> None:
    cls = errors.BY_CODE.get(code)
    assert cls is not None, f"BY_CODE names no class for {code}"
    assert getattr(msb, cls.__name__) is cls, f"msb does not export {cls.__name__}"
    with msb.Client(answering, token="t") as c:
        with pytest.raises(errors.APIError) as raised:
            c.get_sandbox(f"{code}/{status}")
    e = raised.value
    assert type(e) is cls and e.code == code and e.status == status and e.request_id == "r1"
    assert cls("made here").code == code


def test_an_unknown_code_raises_a_base_of_its_statuss_class() -> None:
    for code, status in documented():
        e = errors.from_response(status, {"error": {"code": "a_code_from_a_newer_daemon", "message": "m"}})
        assert issubclass(errors.BY_CODE[code], type(e)), (code, status, type(e))
        assert e.status == status and e.code == "a_code_from_a_newer_daemon"
