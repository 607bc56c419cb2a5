"""List sandboxes page by page and read their metrics through the e2b SDK:
Sandbox.list's filters (metadata, state, template, started_after), order
and paginator (limit, next_token), get_metrics. Prints one JSON object,
which e2b_test.go checks."""
import asyncio
import json
from datetime import datetime, timezone

from e2b import AsyncSandbox, Sandbox, SandboxQuery, SandboxState

out = {}
boxes = [Sandbox.create(metadata={"suite": "list", "n": str(i)}, timeout=120) for i in range(5)]
odd = Sandbox.create(metadata={"suite": "odd", "k&=": "a b&c=d%"}, timeout=120)
ids = [b.sandbox_id for b in boxes]


def pages(**kw):
    p = Sandbox.list(**kw)
    sizes, seen = [], []
    while p.has_next:
        items = p.next_items()
        sizes.append(len(items))
        seen += [s.sandbox_id for s in items]
    return sizes, seen


sizes, seen = pages(query=SandboxQuery(metadata={"suite": "list"}), limit=2)
out["pages"] = sizes
out["newest_first"] = seen == ids[::-1]
sizes, seen = pages(query=SandboxQuery(metadata={"suite": "list"}), limit=3, order="asc")
out["asc"] = [sizes, seen == ids]
out["odd"] = [s.sandbox_id == odd.sandbox_id for s in Sandbox.list(query=SandboxQuery(metadata={"k&=": "a b&c=d%"})).next_items()]
boxes[1].pause()
paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
running = Sandbox.list(query=SandboxQuery(metadata={"suite": "list"}, state=[SandboxState.RUNNING])).next_items()
out["paused"] = [s.sandbox_id == ids[1] for s in paused]
out["running"] = len(running)
out["template"] = len(Sandbox.list(query=SandboxQuery(template="base")).next_items())
out["started_after"] = len(Sandbox.list(query=SandboxQuery(started_after=datetime.now(timezone.utc))).next_items())

sb = boxes[0]
sb.commands.run("timeout 1 sh -c 'while :; do :; done'; head -c 20000000 /dev/zero > /root/big; true")
m = sb.get_metrics()[-1]
out["metrics"] = {"cpu_count": m.cpu_count, "cpu_used_pct": m.cpu_used_pct, "mem_used": m.mem_used,
                  "mem_total": m.mem_total, "disk_used": m.disk_used, "disk_total": m.disk_total,
                  "age": (datetime.now(timezone.utc) - m.timestamp).total_seconds()}
out["metrics_by_id"] = len(Sandbox.get_metrics(sb.sandbox_id)) >= 1


async def main():
    return len(await AsyncSandbox.get_metrics(sb.sandbox_id))


out["async_metrics"] = asyncio.run(main()) >= 1
for b in boxes + [odd]:
    b.kill()
print(json.dumps(out))
