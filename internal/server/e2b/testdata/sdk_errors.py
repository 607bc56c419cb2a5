"""Feed each answer of msb's E2B error table (JSON rows on stdin) to the
e2b SDK's own error mapping and print the exception class each plane
raises: the REST API's, envd's /files and envd's RPCs."""
import json
import sys

from connectrpc.code import Code
from connectrpc.errors import ConnectError

from e2b.api import api_exception_from_code
from e2b.envd.api import format_envd_api_exception
from e2b.envd.rpc import handle_rpc_exception

out = []
for row in json.load(sys.stdin):
    msg = "msb says " + row["kind"]
    out.append({
        "rest": type(api_exception_from_code(row["status"], msg)).__name__,
        "files": type(format_envd_api_exception(row["status"], msg)).__name__,
        "rpc": type(handle_rpc_exception(ConnectError(Code(row["code"]), msg))).__name__,
    })
print(json.dumps(out))
