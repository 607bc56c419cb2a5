"""The E2B SDK's side of `msb bench e2b` (internal/bench/e2b.go runs it).

    python e2b_sdk.py latency --rounds N --rtt R --gap G --same SCRIPT   # E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; MSB_URL, MSB_TOKEN
    python e2b_sdk.py floor --rtt R                # the same SDK calls against a stub that answers at once
    python e2b_sdk.py load --sandboxes S --commands C --concurrency K
    python e2b_sdk.py fork --rounds N --forks F --max-fork M   # as latency, and MSB_URL, MSB_TOKEN

latency: N rounds, the order of the two paths alternating, each create after G seconds
of the client's own work (untimed, as a trainer's between episodes): the E2B path creates a
sandbox of the base template (Sandbox.create()), runs commands.run("true") (which is
`bash -l -c true`), kills it; the native path does POST /v1/sandboxes {"host_base": true},
exec `true`, DELETE. Then one sandbox per path and R commands each, interleaved: E2B's
commands.run("true"), the native exec of `true`, the native exec of what E2B runs
(`exec /bin/bash -l -c true`) and the native exec of --same, the script msb's front end runs
for commands.run("true"). floor: Sandbox.create() then R commands.run("true") against
a server whose process service answers Start at once. load: S sandboxes of the async SDK,
each running C commands that echo their sandbox and index, at most K commands in flight;
counts the commands that failed (lost) and those whose output was another's (mixed).
fork: one parent of the base template (AsyncSandbox.create(), a file written), then N rounds,
the order of the two paths alternating, each timed from the fork call to the last of the F
children's first command answered: the E2B path as a user of the async SDK writes F children
when the SDK takes at most M a call, ceil(F/M) concurrent parent.fork(count=...) calls, each
child's commands.run("true") as soon as its call answers; the native path one
POST /v1/sandboxes/{parent}/fork {"count": F} of the same engine sandboxes (an E2B id is
the engine's), then the F execs of `true` at once from F threads. Children are killed untimed.
Prints one JSON object; times are seconds.
"""
import argparse
import asyncio
import concurrent.futures
import json
import os
import time
import urllib.request


def native_call(method, path, body=None):
    url, token = os.environ["MSB_URL"], os.environ.get("MSB_TOKEN", "")
    req = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        data = r.read()
    return json.loads(data) if data else None


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def e2b_create_first():
    from e2b import Sandbox
    t0 = time.perf_counter()
    sb = Sandbox.create()
    sb.commands.run("true")
    t = time.perf_counter() - t0
    sb.kill()
    return t


def native_create_first():
    t0 = time.perf_counter()
    sid = native_call("POST", "/v1/sandboxes", {"host_base": True})["id"]
    native_call("POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})
    t = time.perf_counter() - t0
    native_call("DELETE", f"/v1/sandboxes/{sid}")
    return t


def latency(a):
    from e2b import Sandbox
    out = {"create_first": {"e2b": [], "native": []}, "command": {"e2b": [], "native": [], "native_login": [], "native_same": []}}
    paths = [("e2b", e2b_create_first), ("native", native_create_first)]
    for i in range(a.rounds):
        for name, fn in paths[i % 2:] + paths[:i % 2]:
            time.sleep(a.gap)
            out["create_first"][name].append(fn())
    sb = Sandbox.create()
    sid = native_call("POST", "/v1/sandboxes", {"host_base": True})["id"]
    runs = [("e2b", lambda: sb.commands.run("true")),
            ("native", lambda: native_call("POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})),
            ("native_login", lambda: native_call("POST", f"/v1/sandboxes/{sid}/exec",
                                                 {"command": "exec /bin/bash -l -c true"})),
            ("native_same", lambda: native_call("POST", f"/v1/sandboxes/{sid}/exec", {"command": a.same}))]
    for i in range(a.rtt):
        k = i % len(runs)
        for name, fn in runs[k:] + runs[:k]:
            out["command"][name].append(timed(fn))
    sb.kill()
    native_call("DELETE", f"/v1/sandboxes/{sid}")
    return out


def floor(a):
    from e2b import Sandbox
    sb = Sandbox.create()
    return {"command": {"floor": [timed(lambda: sb.commands.run("true")) for _ in range(a.rtt)]}}


async def load(a):
    from e2b import AsyncSandbox
    gate = asyncio.Semaphore(a.concurrency)
    lost, mixed, errors = 0, 0, []

    async def one(s):
        nonlocal lost, mixed
        async with gate:
            try:
                sb = await AsyncSandbox.create()
            except Exception as e:  # noqa: BLE001 - counted, and the first few reported
                lost += a.commands
                errors.append(f"create {s}: {e!r}")
                return
        try:
            for c in range(a.commands):
                want = f"{s}-{c}"
                async with gate:
                    try:
                        r = await sb.commands.run(f"echo {want}")
                    except Exception as e:  # noqa: BLE001
                        lost += 1
                        errors.append(f"sandbox {s} command {c}: {e!r}")
                        continue
                if r.stdout != want + "\n" or r.exit_code != 0:
                    mixed += 1
                    errors.append(f"sandbox {s} command {c}: got {r.stdout!r} exit {r.exit_code}")
        finally:
            async with gate:
                await sb.kill()

    t0 = time.perf_counter()
    await asyncio.gather(*(one(s) for s in range(a.sandboxes)))
    return {"load": {"sandboxes": a.sandboxes, "commands": a.commands, "concurrency": a.concurrency,
                     "wall": time.perf_counter() - t0, "lost": lost, "mixed": mixed, "errors": errors[:5]}}


async def e2b_fork(parent, forks, most):
    async def call(count):
        kids = await parent.fork(count=count)
        bad = [k for k in kids if isinstance(k, Exception)]
        if bad:
            raise RuntimeError(f"fork(count={count}): {len(bad)} children failed: {bad[0]!r}")
        await asyncio.gather(*(k.commands.run("true") for k in kids))
        return kids

    t0 = time.perf_counter()
    calls = await asyncio.gather(*(call(min(most, forks - i)) for i in range(0, forks, most)))
    t = time.perf_counter() - t0
    kids = [k for c in calls for k in c]
    if len(kids) != forks:
        raise RuntimeError(f"{len(kids)} children, want {forks}")
    await asyncio.gather(*(k.kill() for k in kids))
    return t


def native_fork(sid, forks, pool):
    t0 = time.perf_counter()
    kids = [k["id"] for k in native_call("POST", f"/v1/sandboxes/{sid}/fork", {"count": forks})["sandboxes"]]
    list(pool.map(lambda k: native_call("POST", f"/v1/sandboxes/{k}/exec", {"command": "true"}), kids))
    t = time.perf_counter() - t0
    if len(kids) != forks:
        raise RuntimeError(f"{len(kids)} children, want {forks}")
    list(pool.map(lambda k: native_call("DELETE", f"/v1/sandboxes/{k}"), kids))
    return t


async def fork(a):
    from e2b import AsyncSandbox
    out = {"fork": {"e2b": [], "native": []}}
    parent = await AsyncSandbox.create()
    await parent.commands.run("echo state > /tmp/msb-bench-state")
    with concurrent.futures.ThreadPoolExecutor(a.forks) as pool:
        for i in range(a.rounds):
            for name in (["e2b", "native"] if i % 2 == 0 else ["native", "e2b"]):
                if name == "e2b":
                    t = await e2b_fork(parent, a.forks, a.max_fork)
                else:
                    t = native_fork(parent.sandbox_id, a.forks, pool)
                out["fork"][name].append(t)
    await parent.kill()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["latency", "floor", "load", "fork"])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--rtt", type=int, default=200)
    ap.add_argument("--gap", type=float, default=0.0, help="seconds the client waits, untimed, before each create")
    ap.add_argument("--same", default="true", help="the script msb's front end runs for commands.run(\"true\")")
    ap.add_argument("--sandboxes", type=int, default=200)
    ap.add_argument("--commands", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--forks", type=int, default=32, help="children of each fork round")
    ap.add_argument("--max-fork", type=int, default=20, help="the most children one SDK fork call takes")
    a = ap.parse_args()
    if a.mode == "latency":
        out = latency(a)
    elif a.mode == "floor":
        out = floor(a)
    elif a.mode == "fork":
        out = asyncio.run(fork(a))
    else:
        out = asyncio.run(load(a))
    print(json.dumps(out))
    os._exit(0)  # past the SDK's pools' finalisers (see sdk_watch.py)


if __name__ == "__main__":
    main()
