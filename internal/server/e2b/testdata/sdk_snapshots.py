"""Drive snapshots, fork and pause/connect of msb's E2B front end with the
real e2b SDK (sync). Prints one JSON object of what it saw, which
e2b_test.go checks."""
import json

from e2b import Sandbox

out = {}
sb = Sandbox.create(timeout=120, metadata={"suite": "snap"})
sb.files.write("/root/state.txt", "v1")

snap = sb.create_snapshot(name="e2b-test-snap")
out["snapshot"] = [snap.snapshot_id, snap.names]
out["listed"] = [s.snapshot_id for s in sb.list_snapshots().next_items()]
from_snap = Sandbox.create(template=snap.snapshot_id, timeout=60)
out["from_snapshot"] = from_snap.files.read("/root/state.txt")
from_snap.kill()

kids = sb.fork(count=2)
out["fork"] = [type(k).__name__ for k in kids]
kids[0].files.write("/root/state.txt", "kid0")
out["fork_reads"] = [k.files.read("/root/state.txt") for k in kids] + [sb.files.read("/root/state.txt")]
out["fork_ids"] = len({k.sandbox_id for k in kids} | {sb.sandbox_id})
for k in kids:
    k.kill()

sb.files.write("/root/state.txt", "v2")
out["paused"] = [sb.pause(), sb.pause()]
out["state"] = Sandbox.get_info(sb.sandbox_id).state.value
out["listed_paused"] = [s.sandbox_id for s in Sandbox.list(query=None).next_items()] == [sb.sandbox_id]
again = Sandbox.connect(sb.sandbox_id)
out["resumed"] = [again.sandbox_id == sb.sandbox_id, again.files.read("/root/state.txt"),
                  again.commands.run("echo up").stdout, Sandbox.get_info(sb.sandbox_id).state.value]
out["connect_running"] = sb.connect().commands.run("echo same").stdout

out["deleted"] = [Sandbox.delete_snapshot(snap.snapshot_id), Sandbox.delete_snapshot(snap.snapshot_id)]
out["listed_after_delete"] = len(sb.list_snapshots().next_items())
sb.kill()
print(json.dumps(out))
