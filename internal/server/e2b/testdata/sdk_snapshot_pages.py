"""list_snapshots' pages through the real e2b SDK, sync and async: limit,
and the next token the paginator reads from x-next-token and sends back.
Prints one JSON object of what it saw, which snapshot_pages_test.go
checks."""
import asyncio
import json

from e2b import AsyncSandbox, Sandbox


def pages(paginator):
    """Every page of a sync paginator, as lists of snapshot ids."""
    out = []
    while paginator.has_next:
        out.append([s.snapshot_id for s in paginator.next_items()])
    return out


out = {}
sb = Sandbox.create(timeout=120)
other = Sandbox.create(timeout=120)
for i in range(5):
    sb.files.write("/root/n.txt", str(i))
    sb.create_snapshot(name=f"page-{i}")
other.create_snapshot(name="page-other")
out["all"] = pages(Sandbox.list_snapshots(limit=2))
out["of_sandbox"] = pages(sb.list_snapshots(limit=2))
out["default_limit"] = pages(Sandbox.list_snapshots(sandbox_id=sb.sandbox_id))

# a snapshot deleted after the first page neither repeats nor shifts the rest
p = Sandbox.list_snapshots(sandbox_id=sb.sandbox_id, limit=2)
first = [s.snapshot_id for s in p.next_items()]
Sandbox.delete_snapshot("page-2")
out["deleted_between"] = [first] + pages(p)


async def async_pages():
    p = AsyncSandbox.list_snapshots(sandbox_id=sb.sandbox_id, limit=3)
    got = []
    while p.has_next:
        got.append([s.snapshot_id for s in await p.next_items()])
    return got

out["async"] = asyncio.run(async_pages())
for name in ["page-0", "page-1", "page-3", "page-4", "page-other"]:
    Sandbox.delete_snapshot(name)
sb.kill()
other.kill()
print(json.dumps(out))
