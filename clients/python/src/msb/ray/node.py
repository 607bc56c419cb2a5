"""One msb daemon per Ray node, supervised by a per-node actor.

Nouns:

- **capacity**: what a node offers, as Ray custom resources declared when
  the node starts: ``msb_sandbox`` (agents' sandbox slots; the daemon is
  started with ``--max-sandboxes`` that many plus its grading reserve, the
  room a sandbox's ``evaluate`` grades in) and ``msb_io`` (the I/O budget:
  concurrent layer pulls and builds). ``node_resources`` makes the dict for
  ``ray start --resources`` or ``Cluster.add_node(resources=...)``.
- **NodeDaemon**: the actor pinned to one node (hard node affinity) that
  starts ``msb serve`` on a unix socket in the node's own directory and
  ``msb cache serve`` on a TCP port for peers, restarts them if they die,
  and stops them when it goes (a daemon also gets SIGTERM when its actor's
  process dies, so a killed node leaves no daemon behind). With ``attach``
  it supervises nothing and points at a daemon already running there.
- **Daemons**: the driver's view of every node's NodeDaemon, by node id.

A rollout worker on node X calls ``local_client()`` and gets a client of
node X's daemon: its sandboxes' traffic never leaves the node.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .. import Client
from .. import types as t
from ..errors import MsbError, NotFound, QuotaExceeded
from .placement import Placement, Placer

log = logging.getLogger(__name__)

#: Ray custom resource: sandbox slots of a node's daemon
SANDBOX = "msb_sandbox"
#: Ray custom resource: the node's I/O budget (layer pulls and builds at once)
IO = "msb_io"
#: Ray namespace of the NodeDaemon actors
NAMESPACE = "msb"


def node_resources(sandboxes: int, io: int = 2) -> Dict[str, float]:
    """The custom resources a node publishes (``ray start --resources``)."""
    return {SANDBOX: float(sandboxes), IO: float(io)}


def snapshot_ref(name: str) -> str:
    """The cache ref of a named snapshot (what ``msb cache pull`` takes)."""
    return f"snapshot/{name}"


def actor_name(node_id: str) -> str:
    """The name of the NodeDaemon of a node."""
    return f"msb-node-{node_id}"


@dataclass
class NodeConfig:
    """How every node's daemon is started.

    ``base_dir`` is a node-local directory; each node uses
    ``base_dir/<node id>/`` (cache, state, out, socket) unless ``cache_dir``
    names a cache (shared by the nodes of one host only in tests).
    """

    base_dir: str
    #: the msb binary (msb-full next to it runs msb serve; msb-sandbox next
    #: to it is used when present)
    msb: str = "msb"
    cache_dir: str = ""
    #: dataset file and spec file every daemon loads (paths on the nodes)
    dataset: str = ""
    spec: str = ""
    #: more msb serve flags (e.g. ["--memory-budget", "8G"])
    serve_args: List[str] = field(default_factory=list)
    #: environment added to the daemons'
    env: Dict[str, str] = field(default_factory=dict)
    #: attach to a running daemon (its socket or URL) instead of starting one
    attach: str = ""
    #: the URL peers pull this node's layers from when attaching
    attach_cache_url: str = ""
    #: the host peers reach this node's msb cache serve at
    cache_host: str = "127.0.0.1"
    startup_timeout: float = 60.0
    #: grading sandboxes each daemon holds room for beyond the node's slots
    #: (``msb serve --grading-reserve``): an agent's evaluate grades in a
    #: second sandbox while its own is open, so slots alone would deadlock
    grading_reserve: int = 1

    def __post_init__(self) -> None:
        # The daemons and workers run elsewhere (another cwd, another
        # node): a relative path is the caller's, made absolute here.
        self.base_dir = abs_path(self.base_dir)
        self.cache_dir = abs_path(self.cache_dir)
        self.dataset = abs_path(self.dataset)
        self.spec = abs_path(self.spec)
        if os.sep in self.msb:  # a bare name is looked up in each node's PATH
            self.msb = abs_path(self.msb)


def abs_path(path: str) -> str:
    """path made absolute against the current directory ("" stays "")."""
    return os.path.abspath(path) if path else ""


@dataclass
class NodeInfo:
    """Where one node's daemon is."""

    node_id: str
    address: str
    cache_url: str
    cache_dir: str
    out_dir: str
    sandboxes: int
    io: int
    #: the daemon's process id (0 when attached), and how often it was restarted
    pid: int = 0
    restarts: int = 0


def _pdeathsig() -> None:
    """In the child: SIGTERM when the parent (the actor's process) dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class NodeDaemon:
    """The actor of one node (``Daemons.start`` creates one per node)."""

    def __init__(self, cfg: Dict[str, Any], node_id: str) -> None:
        self.cfg = NodeConfig(**cfg)
        self.node_id = node_id
        total = _node_total(node_id)
        self.sandboxes, self.io = int(total.get(SANDBOX, 0)), int(total.get(IO, 1))
        self.dir = os.path.join(self.cfg.base_dir, node_id[:16])
        self.cache_dir = self.cfg.cache_dir or os.path.join(self.dir, "cache")
        self.out_dir = os.path.join(self.dir, "out")
        self._procs: Dict[str, subprocess.Popen] = {}
        self._stop = threading.Event()
        self.restarts = 0
        if self.cfg.attach:
            self.address = self.cfg.attach
            self.cache_url = self.cfg.attach_cache_url
        else:
            for d in (self.dir, self.out_dir, os.path.join(self.dir, "state")):
                os.makedirs(d, exist_ok=True)
            self.address = "unix://" + os.path.join(self.dir, "msb.sock")
            self.cache_url = f"http://{self.cfg.cache_host}:{_free_port(self.cfg.cache_host)}"
            self._start("serve")
            self._wait_healthy()
            self._start("cache")
            self._wait_cache()
            threading.Thread(target=self._supervise, daemon=True, name="msb-supervisor").start()
        self.client = Client(self.address)
        if self.cfg.dataset:
            self.client.load_dataset(self.cfg.dataset)

    # Processes --------------------------------------------------------------

    def _env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.update(self.cfg.env)
        env["MSB_CACHE"] = self.cache_dir
        env["MSB_STATE_DIR"] = os.path.join(self.dir, "state")
        return env

    def _argv(self, what: str) -> List[str]:
        msb = self.cfg.msb
        if what == "serve":
            argv = [msb, "serve", "--listen", self.address, "--cache", self.cache_dir, "--out", self.out_dir]
            if self.sandboxes:
                reserve = max(self.cfg.grading_reserve, 0)
                argv += ["--max-sandboxes", str(self.sandboxes + reserve), "--grading-reserve", str(reserve)]
            if self.cfg.spec:
                argv += ["--spec", self.cfg.spec]
            return argv + list(self.cfg.serve_args)
        port = self.cache_url.rsplit(":", 1)[1]
        return [msb, "cache", "serve", "--cache", self.cache_dir, "--listen", f"{self.cfg.cache_host}:{port}"]

    def _start(self, what: str) -> None:
        log = open(os.path.join(self.dir, f"{what}.log"), "ab")
        self._procs[what] = subprocess.Popen(self._argv(what), env=self._env(), stdout=log, stderr=log,
                                             stdin=subprocess.DEVNULL, preexec_fn=_pdeathsig)
        log.close()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.cfg.startup_timeout
        c = Client(self.address)
        while True:
            p = self._procs["serve"]
            if p.poll() is not None:
                raise MsbError(f"msb serve on node {self.node_id} exited {p.returncode}: {self._log_tail('serve')}")
            try:
                c.health()
                return
            except MsbError:
                if time.monotonic() > deadline:
                    raise MsbError(f"msb serve on node {self.node_id} did not answer in "
                                   f"{self.cfg.startup_timeout}s: {self._log_tail('serve')}") from None
                time.sleep(0.05)

    def _wait_cache(self) -> None:
        host, port = self.cache_url[len("http://"):].rsplit(":", 1)
        deadline = time.monotonic() + self.cfg.startup_timeout
        while True:
            p = self._procs["cache"]
            if p.poll() is not None:
                raise MsbError(f"msb cache serve on node {self.node_id} exited {p.returncode}: "
                               f"{self._log_tail('cache')}")
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise MsbError(f"msb cache serve on node {self.node_id} did not listen") from None
                time.sleep(0.05)

    def _log_tail(self, what: str) -> str:
        try:
            with open(os.path.join(self.dir, f"{what}.log"), "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError as e:
            return str(e)

    def _supervise(self) -> None:
        """Restart a daemon that exited (checked every second); a restarted
        msb serve loads the dataset again (instances live in its memory)."""
        while not self._stop.wait(1.0):
            for what in ("serve", "cache"):
                p = self._procs.get(what)
                if p is None or p.poll() is None or self._stop.is_set():
                    continue
                self.restarts += 1
                log.warning("node %s: msb %s (pid %d) exited %s; restarting it (restart %d): %s", self.node_id[:12],
                            what, p.pid, p.returncode, self.restarts, self._log_tail(what)[-500:])
                self._start(what)
                try:
                    if what == "serve":
                        self._wait_healthy()
                        if self.cfg.dataset:
                            self.client.load_dataset(self.cfg.dataset)
                    else:
                        self._wait_cache()
                except MsbError as e:
                    log.warning("node %s: restarted msb %s is not up yet, retrying next round: %s",
                                self.node_id[:12], what, e)

    # Methods ----------------------------------------------------------------

    def info(self) -> Dict[str, Any]:
        """Where this node's daemon is (a NodeInfo as a dict)."""
        p = self._procs.get("serve")
        return asdict(NodeInfo(node_id=self.node_id, address=self.address, cache_url=self.cache_url,
                               cache_dir=self.cache_dir, out_dir=self.out_dir, sandboxes=self.sandboxes,
                               io=self.io, pid=p.pid if p else 0, restarts=self.restarts))

    def layers(self, instance_id: str) -> Dict[str, Any]:
        """Which layers of an instance this node's cache holds
        (GET /v1/instances/{id}/layers)."""
        return asdict(self.client.instance_layers(instance_id))

    def snapshot_room(self, name: str) -> Dict[str, Any]:
        """Whether this node's cache holds the named snapshot (``has``) and
        how many agents' sandboxes its daemon has room for now (``free``)."""
        q = self.client.health().quota
        free = (q.max_sandboxes - q.grading_reserve - q.sandboxes) if q.max_sandboxes else max(self.sandboxes, 1)
        return {"has": any(s.name == name for s in self.client.snapshots()), "free": max(free, 0)}

    def fork_snapshot(self, name: str, n: int, labels: Dict[str, str], warm: int) -> List[Dict[str, Any]]:
        """Fork n sandboxes from the named snapshot on this node's daemon
        (SandboxInfos as dicts)."""
        return [t.to_json(sb.info, keep_zero=True) for sb in self.client.fork_snapshot(name, n, labels=labels, warm=warm)]

    def stop(self) -> None:
        """Stop the daemons this actor started (SIGTERM, then SIGKILL)."""
        self._stop.set()
        for p in self._procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self._procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()


def _node_total(node_id: str) -> Dict[str, float]:
    for n in ray.nodes():
        if n.get("NodeID") == node_id:
            return n.get("Resources", {})
    return {}


def alive_nodes() -> List[Dict[str, Any]]:
    """Ray's alive nodes that publish sandbox slots."""
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(SANDBOX, 0) > 0]


@ray.remote(num_cpus=0)
def _pull(msb: str, cache_dir: str, peer_url: str, refs: List[str]) -> List[Dict[str, Any]]:
    """Pull refs from a peer's msb cache serve into this node's cache (runs
    on the pulling node, holding one unit of its I/O budget)."""
    out = []
    for ref in refs:
        p = subprocess.run([msb, "cache", "pull", "--cache", cache_dir, "--json", peer_url, ref],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise MsbError(f"msb cache pull {peer_url} {ref}: exit {p.returncode}: {p.stderr.strip()}")
        out.append(json.loads(p.stdout))
    return out


class Daemons:
    """Every node's NodeDaemon, as the driver sees them."""

    def __init__(self, cfg: NodeConfig, handles: Dict[str, Any], infos: Dict[str, NodeInfo]) -> None:
        self.cfg = cfg
        self.handles = handles
        self.infos = infos

    @classmethod
    def start(cls, cfg: NodeConfig, nodes: Optional[List[str]] = None) -> "Daemons":
        """Start (or attach) a NodeDaemon on every alive node publishing
        ``msb_sandbox`` (or on ``nodes``), and wait until each answers."""
        ids = nodes or [n["NodeID"] for n in alive_nodes()]
        if not ids:
            raise MsbError(f"no alive Ray node publishes the {SANDBOX!r} resource "
                           f"(start nodes with resources={node_resources(8)})")
        actor = ray.remote(NodeDaemon)
        handles = {}
        for nid in ids:
            handles[nid] = actor.options(
                name=actor_name(nid), namespace=NAMESPACE, num_cpus=0, max_concurrency=64, max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
            ).remote(asdict(cfg), nid)
        infos = {nid: NodeInfo(**ray.get(h.info.remote())) for nid, h in handles.items()}
        return cls(cfg, handles, infos)

    def alive(self) -> List[str]:
        """Node ids whose node is still alive in Ray."""
        up = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        return [nid for nid in self.infos if nid in up]

    def ping(self, node_id: str, timeout: float = 10.0) -> bool:
        """Whether a node's actor still answers."""
        try:
            ray.get(self.handles[node_id].info.remote(), timeout=timeout)
            return True
        except Exception:  # noqa: BLE001  any failure means: not usable
            return False

    def layers(self, node_id: str, instance_id: str) -> Dict[str, Any]:
        """An instance's layer status on one node."""
        return ray.get(self.handles[node_id].layers.remote(instance_id))

    def pull(self, node_id: str, peer_id: str, refs: List[str]) -> List[Dict[str, Any]]:
        """Have node_id pull refs from peer_id's cache (one msb_io unit)."""
        info, peer = self.infos[node_id], self.infos[peer_id]
        task = _pull.options(resources={IO: 1},
                             scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
        return ray.get(task.remote(self.cfg.msb, info.cache_dir, peer.cache_url, refs))

    def place_snapshot(self, name: str) -> Placement:
        """Where a fork of the named snapshot goes, by cache affinity as for
        an instance (``Placer``): a node whose cache holds the snapshot and
        has room (the one with most), else the node with most room, which
        pulls the snapshot (its record and layers, ``snapshot/<name>``) from
        a node holding it first. NotFound when no node holds it; QuotaExceeded
        when no node has room."""
        nodes = self.alive()
        rooms = dict(zip(nodes, ray.get([self.handles[nid].snapshot_room.remote(name) for nid in nodes])))
        placer = Placer({nid: r["free"] for nid, r in rooms.items()})
        ref = snapshot_ref(name)
        for nid, r in rooms.items():
            if r["has"]:
                placer.learn(nid, [ref])
        if not any(r["has"] for r in rooms.values()):
            raise NotFound(f"snapshot {name!r}: no node's cache holds it")
        p = placer.place([ref])
        if p is None:
            raise QuotaExceeded(f"forking snapshot {name!r}: no node has room for a sandbox now")
        if p.pull:
            self.pull(p.node, p.source, p.pull)
        return p

    def fork_snapshot(self, name: str, n: int = 1, *, labels: Optional[Dict[str, str]] = None,
                      warm: int = 0) -> Tuple[str, List[t.SandboxInfo]]:
        """Fork n sandboxes from the named snapshot on the node
        ``place_snapshot`` picks (pulling it there first when needed): that
        node's id and the children, which live on its daemon (reach them
        from a task placed there, with ``local_client()``). ``warm`` asks that
        daemon to keep children started ahead (its ``--spares``): the next
        forks placed there take them."""
        p = self.place_snapshot(name)
        infos = ray.get(self.handles[p.node].fork_snapshot.remote(name, n, dict(labels or {}), warm))
        return p.node, [t.from_json(t.SandboxInfo, i) for i in infos]

    def stop(self) -> None:
        """Stop every daemon and its actor."""
        for nid, h in self.handles.items():
            try:
                ray.get(h.stop.remote(), timeout=60)
            except Exception:  # a node already gone: its daemon got SIGTERM with its actor
                pass
            ray.kill(h)


_local: Dict[str, Client] = {}


def local_client() -> Client:
    """A client of this node's daemon (call it inside a Ray task or actor):
    its sandboxes live on this node, so exec traffic stays local."""
    nid = ray.get_runtime_context().get_node_id()
    if nid not in _local:
        h = ray.get_actor(actor_name(nid), namespace=NAMESPACE)
        _local[nid] = Client(ray.get(h.info.remote())["address"])
    return _local[nid]


def sandbox_options(n: int = 1) -> Dict[str, Any]:
    """``.options(**sandbox_options())`` for a Ray task or actor that holds
    n sandboxes at once: placed where a daemon has room."""
    return {"resources": {SANDBOX: float(n)}}
