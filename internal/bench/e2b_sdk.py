"""The E2B SDK's side of `msb bench e2b` (internal/bench/e2b.go runs it).

    python e2b_sdk.py latency --rounds N --rtt R --gap G --same SCRIPT   # E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; MSB_URL, MSB_TOKEN
    python e2b_sdk.py floor --rtt R                # the same SDK calls against a stub that answers at once
    python e2b_sdk.py load --sandboxes S --commands C --concurrency K

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
Prints one JSON object; times are seconds.
"""
import argparse
import asyncio
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["latency", "floor", "load"])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--rtt", type=int, default=200)
    ap.add_argument("--gap", type=float, default=0.0, help="seconds the client waits, untimed, before each create")
    ap.add_argument("--same", default="true", help="the script msb's front end runs for commands.run(\"true\")")
    ap.add_argument("--sandboxes", type=int, default=200)
    ap.add_argument("--commands", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=32)
    a = ap.parse_args()
    if a.mode == "latency":
        out = latency(a)
    elif a.mode == "floor":
        out = floor(a)
    else:
        out = asyncio.run(load(a))
    print(json.dumps(out))
    os._exit(0)  # past the SDK's pools' finalisers (see sdk_watch.py)


if __name__ == "__main__":
    main()
