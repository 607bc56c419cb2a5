"""Refresh a sandbox, read envd's /envs and the sandbox's logs through the
e2b SDK's own clients: the generated REST client's refreshes and logs
calls (sync and async, parsed into the SDK's models) and the sandbox's
envd HTTP client. Prints one JSON object, which refresh_test.go checks."""
import asyncio
import json

from e2b import Sandbox
from e2b.api.client.api.sandboxes import (
    get_sandboxes_sandbox_id_logs,
    get_v_2_sandboxes_sandbox_id_logs,
    post_sandboxes_sandbox_id_refreshes as refreshes,
)
from e2b.api.client.models import (
    Error,
    LogLevel,
    LogsDirection,
    SandboxLogs,
    SandboxLogsV2Response,
    SandboxRefreshRequest,
)
from e2b.api.client_async import get_api_client as get_async_api_client
from e2b.api.client_sync import get_api_client
from e2b.connection_config import ConnectionConfig

out = {}
config = ConnectionConfig()
client = get_api_client(config)
sb = Sandbox.create(timeout=300, envs={"MSB_REFRESH": "a b", "EMPTY": ""})


def end():
    return sb.get_info().end_at


def refresh(body, sandbox_id=None):
    return refreshes.sync_detailed(sandbox_id or sb.sandbox_id, client=client, body=body)


# A later end moves the end; a shorter one leaves it.
before = end()
res = refresh(SandboxRefreshRequest(duration=900))
after = end()
out["longer"] = [int(res.status_code), (after - before).total_seconds()]
res = refresh(SandboxRefreshRequest(duration=20))
out["shorter"] = [int(res.status_code), end() == after]

# Under 15 s, or none at all, is E2B's 15 s: later than an end 12 s away.
sb.set_timeout(12)
before = end()
res = refresh(SandboxRefreshRequest(duration=1))
out["least"] = [int(res.status_code), (end() - before).total_seconds()]
before = end()
res = refresh(SandboxRefreshRequest())
out["none"] = [int(res.status_code), end() >= before]
sb.set_timeout(300)

res = refresh(SandboxRefreshRequest(duration=60), sandbox_id="nope")
out["unknown"] = [int(res.status_code), isinstance(res.parsed, Error) and "nope" in res.parsed.message]


async def refresh_async():
    res = await refreshes.asyncio_detailed(sb.sandbox_id, client=get_async_api_client(config),
                                           body=SandboxRefreshRequest(duration=600))
    return int(res.status_code)


out["async"] = asyncio.run(refresh_async())

# envd's /envs, through the sandbox's own envd client (access token and all).
r = sb._envd_api.get("/envs")
out["envs"] = [r.status_code, r.json(), r.headers.get("cache-control")]
out["envs_in_command"] = sb.commands.run('printf %s "$MSB_REFRESH"').stdout

# The logs, parsed by the SDK's generated client into its models.
sb.commands.run("true")
v1 = get_sandboxes_sandbox_id_logs.sync_detailed(sb.sandbox_id, client=client).parsed
out["v1"] = [isinstance(v1, SandboxLogs), [l.line for l in v1.logs],
             sorted({e.level.value for e in v1.log_entries}), all(e.fields["sandboxID"] == sb.sandbox_id for e in v1.log_entries)]
v2 = get_v_2_sandboxes_sandbox_id_logs.sync_detailed(
    sb.sandbox_id, client=client, direction=LogsDirection.BACKWARD, level=LogLevel.INFO, limit=1).parsed
out["v2"] = [isinstance(v2, SandboxLogsV2Response), [e.message for e in v2.logs],
             [e.timestamp.tzinfo is not None for e in v2.logs]]
v2 = get_v_2_sandboxes_sandbox_id_logs.sync_detailed(sb.sandbox_id, client=client, search="refreshed").parsed
out["v2_search"] = len(v2.logs)

sb.pause()
res = refresh(SandboxRefreshRequest(duration=60))
out["paused"] = int(res.status_code)
sb.kill()
print(json.dumps(out))
