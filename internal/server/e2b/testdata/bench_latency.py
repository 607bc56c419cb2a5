"""Latency of the E2B path beside msb's native API, on the same work.

    E2B_API_URL=http://127.0.0.1:3000 E2B_SANDBOX_URL=http://127.0.0.1:3000 E2B_API_KEY=secret \
    MSB_URL=http://127.0.0.1:7777 MSB_TOKEN=secret \
    .venv-test/bin/python internal/server/e2b/testdata/bench_latency.py --n 50

against `msb serve --listen 127.0.0.1:7777 --token-file token --e2b 127.0.0.1:3000`. For each
path, n times: create a sandbox of the base (the SDK's `Sandbox.create()`; native `POST
/v1/sandboxes {"host_base": true}`), run `true` in it, kill it; the first figure is create to
the first command answered. Then `rtt` commands of `true` in one sandbox. Prints one JSON
object of medians and 95th percentiles in milliseconds. Without MSB_URL only the E2B path runs.
"""
import argparse
import json
import os
import statistics
import time
import urllib.request

from e2b import Sandbox


def pct(xs):
    xs = sorted(xs)
    return {"p50_ms": round(statistics.median(xs) * 1000, 2),
            "p95_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.95))] * 1000, 2)}


def e2b_path(n, rtt):
    first, kill, runs = [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        sb = Sandbox.create()
        sb.commands.run("true")
        t1 = time.perf_counter()
        sb.kill()
        first.append(t1 - t0)
        kill.append(time.perf_counter() - t1)
    sb = Sandbox.create()
    for _ in range(rtt):
        t0 = time.perf_counter()
        sb.commands.run("true")
        runs.append(time.perf_counter() - t0)
    sb.kill()
    return {"create_to_first_command": pct(first), "kill": pct(kill), "command_true": pct(runs)}


def native_call(url, token, method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        data = r.read()
    return json.loads(data) if data else None


def native_path(url, token, n, rtt):
    first, kill, runs = [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        sid = native_call(url, token, "POST", "/v1/sandboxes", {"host_base": True})["id"]
        native_call(url, token, "POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})
        t1 = time.perf_counter()
        native_call(url, token, "DELETE", f"/v1/sandboxes/{sid}")
        first.append(t1 - t0)
        kill.append(time.perf_counter() - t1)
    sid = native_call(url, token, "POST", "/v1/sandboxes", {"host_base": True})["id"]
    for _ in range(rtt):
        t0 = time.perf_counter()
        native_call(url, token, "POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})
        runs.append(time.perf_counter() - t0)
    native_call(url, token, "DELETE", f"/v1/sandboxes/{sid}")
    return {"create_to_first_command": pct(first), "kill": pct(kill), "command_true": pct(runs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30, help="sandboxes per path")
    ap.add_argument("--rtt", type=int, default=200, help="commands of true in one sandbox per path")
    a = ap.parse_args()
    out = {"n": a.n, "rtt": a.rtt, "e2b": e2b_path(a.n, a.rtt)}
    if os.environ.get("MSB_URL"):
        out["native"] = native_path(os.environ["MSB_URL"], os.environ.get("MSB_TOKEN", ""), a.n, a.rtt)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
