"""Batch evaluation and validation over a Ray cluster.

The same run as ``msb eval`` / ``msb validate`` on one node, spread over
every node's daemon, and the same files at the end:

1. **Work**: one prediction (evaluation) or one instance (validation: its
   gold and empty patches). Work whose results are already under
   ``out/<run>/<model>/<instance>/result.json`` and stand for it is done:
   a daemon decides (``Client.reusable``), by the rule its own runs resume
   by, so a rerun resumes.
2. Each piece of work is placed by cache affinity (``placement.Placer``),
   the chosen node pulls missing layers from a peer first, then a Ray task
   pinned to that node, holding one ``msb_sandbox`` unit, runs it as a
   one-instance job on that node's daemon (``POST /v1/jobs``), which writes
   the harness's files under the daemon's ``--out``; the task sends those
   files back and the driver puts them, unchanged, in ``out`` (a directory
   replaced at once, as the harness does).
3. A node that dies takes its running work with it: that work is placed
   again on the nodes left; work already back is never run again.
4. The summary: ``msb eval`` (or ``msb validate``) with the same run id on
   the driver, which finds every result stored and evaluates nothing, so
   the summary file (and valid.json / invalid.json) are written by the same
   code as on one node. The driver checks that nothing was evaluated then.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .. import Client
from ..errors import MsbError
from .node import SANDBOX, Daemons, abs_path
from .placement import Placement, Placer

log = logging.getLogger(__name__)


def load_predictions(path: str) -> List[Dict[str, Any]]:
    """A predictions file as the harness reads it: a JSON list, JSONL, or a
    dict by instance id; every row needs its three fields."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    rows = list(data.values()) if isinstance(data, dict) else data
    for i, r in enumerate(rows):
        missing = [k for k in ("instance_id", "model_name_or_path", "model_patch") if k not in r]
        if missing:
            raise ValueError(f"{path}: row {i + 1} lacks {', '.join(missing)}")
    return rows


@dataclass
class Work:
    """One unit of the run: a prediction, or (validation) an instance."""

    instance_id: str
    models: List[str]
    prediction: Optional[Dict[str, Any]] = None
    gold: bool = False
    attempts: int = 0
    refs: List[str] = field(default_factory=list)
    #: model -> where a run keeps its results of the instance, relative to
    #: the run's directory; the daemon says (``Reuse.dirs``)
    dirs: Dict[str, str] = field(default_factory=dict)


@ray.remote(num_cpus=0, max_retries=0)
def _run_on_node(address: str, run_id: str, kind: str, work: Dict[str, Any]) -> Dict[str, Any]:
    """On the work's node: one-instance job on the local daemon, then the
    harness's files it wrote, to be copied by the driver."""
    c = Client(address)
    pred = work["prediction"]
    job = c.submit_job(run_id, kind=kind, instance_ids=[work["instance_id"]],
                       predictions=[pred] if pred else (), gold=work["gold"], workers=1)
    job = c.wait_job(job.id, poll=0.05)
    if job.state != "done":
        raise MsbError(f"job {job.id} for {work['instance_id']} on {address}: {job.state}: {job.error}")
    files: Dict[str, bytes] = {}
    for rel in work["dirs"].values():
        d = os.path.join(job.out_dir, rel)  # out_dir: <--out>/<run>
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                with open(os.path.join(d, name), "rb") as f:
                    files[os.path.join(rel, name)] = f.read()
    return {"files": files, "outcomes": [r.outcome for r in job.results]}


def _replace_dir(final: str, files: Dict[str, bytes]) -> None:
    """Make final hold exactly files, swapped in at once."""
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(final) + ".new-", dir=parent)
    for name, data in files.items():
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    os.chmod(tmp, 0o755)
    old = ""
    if os.path.lexists(final):
        old = tmp + ".old"
        os.rename(final, old)
    os.rename(tmp, final)
    if old:
        shutil.rmtree(old)


@dataclass
class ClusterRun:
    """A batch run over the cluster (see the module's steps)."""

    daemons: Daemons
    dataset: str
    run_id: str
    out: str
    kind: str = "evaluation"
    #: a predictions file, or "gold" (evaluation only)
    predictions: str = "gold"
    spec: str = ""
    keep_errors: bool = False
    #: placements tried per piece of work before it is reported as failed
    attempts: int = 3
    progress: Optional[Callable[[str], None]] = None
    #: what happened, for tests and logs: (event, instance, node)
    events: List[Tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Relative paths are the caller's: the summary pass and the files
        # read back must not depend on where anything else runs.
        self.dataset, self.out, self.spec = abs_path(self.dataset), abs_path(self.out), abs_path(self.spec)
        if self.predictions != "gold":
            self.predictions = abs_path(self.predictions)

    def _say(self, event: str, iid: str, node: str = "") -> None:
        self.events.append((event, iid, node))
        if self.progress:
            self.progress(f"{event} {iid} {node[:12]}".rstrip())

    def _works(self, any_client: Client) -> List[Work]:
        if self.kind == "validation":
            return [Work(iid, ["gold", "empty"]) for iid in any_client.list_instances()]
        if self.predictions == "gold":
            return [Work(iid, ["gold"], gold=True) for iid in any_client.list_instances()]
        return [Work(r["instance_id"], [r["model_name_or_path"]], prediction=r)
                for r in load_predictions(self.predictions)]

    def _done(self, c: Client, w: Work) -> bool:
        """The work's results are stored in out and stand for it: the daemon
        decides, by the rule its own runs resume by. Where the results are
        kept, the daemon says too (``Reuse.dirs``, kept in ``w.dirs``)."""
        ask = {"kind": self.kind, "prediction": w.prediction, "keep_errors": self.keep_errors}
        if not w.dirs:
            w.dirs = c.reusable(w.instance_id, [], **ask).dirs
        stored = []
        for rel in w.dirs.values():
            try:
                with open(os.path.join(self.out, self.run_id, rel, "result.json"), encoding="utf-8") as f:
                    stored.append(json.load(f))
            except (OSError, ValueError):
                return False
        return c.reusable(w.instance_id, stored, **ask).reusable

    def run(self) -> Dict[str, Any]:
        """Run everything not done yet, then write the summary; the summary
        pass's report (``msb eval --json`` / ``msb validate --json``)."""
        alive = self.daemons.alive()
        if not alive:
            raise MsbError("no alive node with an msb daemon")
        c0 = Client(self.daemons.infos[alive[0]].address)
        pending: List[Work] = []
        for w in self._works(c0):
            if w.prediction is not None and not (w.prediction.get("model_patch") or "").strip():
                continue  # an empty patch is not run; the summary pass records it
            if self._done(c0, w):
                self._say("kept", w.instance_id)
                continue
            pending.append(w)
        placer = Placer({nid: self.daemons.infos[nid].sandboxes for nid in alive})
        failed: Dict[str, str] = {}
        running: Dict[Any, Tuple[Work, Placement]] = {}
        while pending or running:
            self._launch(pending, running, placer, failed)
            if not running:
                if pending:
                    raise MsbError(f"nothing can run: {len(pending)} pending, no node with room")
                break
            ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for ref in ready:
                w, p = running.pop(ref)
                self._finish(ref, w, p, placer, pending, failed)
            self._forget_dead(placer)
        if failed:
            raise MsbError("work failed on every try (rerun the same run id to resume):\n  " +
                           "\n  ".join(f"{k}: {v}" for k, v in sorted(failed.items())))
        return self._summarize()

    def _launch(self, pending: List[Work], running: Dict[Any, Tuple[Work, Placement]], placer: Placer,
                failed: Dict[str, str]) -> None:
        waiting: List[Work] = []
        while pending:
            w = pending.pop(0)
            if not w.refs:
                w.refs = self._refs(w, placer)
            p = placer.place(w.refs)
            if p is None:
                waiting.append(w)
                if all(n.free <= 0 for n in placer.nodes.values()):
                    break
                continue
            info = self.daemons.infos[p.node]
            if p.pull:
                try:
                    self.daemons.pull(p.node, p.source, p.pull)
                    placer.learn(p.node, p.pull)
                    self._say("pulled", w.instance_id, p.node)
                except Exception as e:  # noqa: BLE001  the build fallback is the node's own
                    self._say(f"pull failed ({e})", w.instance_id, p.node)
                    p.build = p.pull
            placer.take(p)
            w.attempts += 1
            task = _run_on_node.options(
                resources={SANDBOX: 1},
                scheduling_strategy=NodeAffinitySchedulingStrategy(p.node, soft=False))
            ref = task.remote(info.address, self.run_id, self.kind,
                              {"instance_id": w.instance_id, "dirs": w.dirs, "prediction": w.prediction,
                               "gold": w.gold})
            running[ref] = (w, p)
            self._say("placed", w.instance_id, p.node)
        pending[:0] = waiting

    def _refs(self, w: Work, placer: Placer) -> List[str]:
        """The instance's layer refs, and which nodes hold them."""
        refs: List[str] = []
        for nid in list(placer.nodes):
            try:
                st = self.daemons.layers(nid, w.instance_id)
            except Exception:  # noqa: BLE001  a node that died meanwhile
                continue
            refs = [layer["ref"] for layer in st["layers"]]
            placer.learn(nid, [layer["ref"] for layer in st["layers"] if layer["present"]])
        return refs

    def _finish(self, ref: Any, w: Work, p: Placement, placer: Placer, pending: List[Work],
                failed: Dict[str, str]) -> None:
        try:
            out = ray.get(ref)
        except ray.exceptions.RayTaskError as e:  # the work itself failed on a live node
            placer.release(p.node, w.refs, ok=False)
            self._retry(w, pending, failed, f"on {p.node[:12]}: {e}")
            return
        except ray.exceptions.RayError as e:  # the node (or its worker) died
            placer.release(p.node, w.refs, ok=False)
            self._say("lost", w.instance_id, p.node)
            if not self.daemons.ping(p.node):
                placer.remove(p.node)
                self._say("node gone", "", p.node)
            self._retry(w, pending, failed, f"node {p.node[:12]} lost: {type(e).__name__}")
            return
        by_dir: Dict[str, Dict[str, bytes]] = {}
        for rel, data in out["files"].items():
            d, name = os.path.split(rel)
            by_dir.setdefault(d, {})[name] = data
        for d, files in by_dir.items():
            _replace_dir(os.path.join(self.out, self.run_id, d), files)
        placer.release(p.node, w.refs, ok=True)
        self._say("done", w.instance_id, p.node)

    def _retry(self, w: Work, pending: List[Work], failed: Dict[str, str], why: str) -> None:
        if w.attempts >= self.attempts:
            log.error("run %s: %s failed on all %d tries, last %s", self.run_id, w.instance_id, w.attempts, why)
            failed[w.instance_id] = why
        else:
            log.warning("run %s: retrying %s (try %d of %d failed %s)", self.run_id, w.instance_id,
                        w.attempts, self.attempts, why)
            pending.append(w)

    def _forget_dead(self, placer: Placer) -> None:
        up = set(self.daemons.alive())
        for nid in list(placer.nodes):
            if nid not in up:
                placer.remove(nid)
                self._say("node gone", "", nid)

    def _summarize(self) -> Dict[str, Any]:
        """The summary pass: every result is stored, nothing is evaluated."""
        verb = "validate" if self.kind == "validation" else "eval"
        argv = [self.daemons.cfg.msb, verb, "--dataset", self.dataset, "--run-id", self.run_id, "--out", self.out,
                "--keep-errors", "--json", "--cache", tempfile.mkdtemp(prefix="msb-summary-cache-")]
        if self.spec:
            argv += ["--spec", self.spec]
        if verb == "eval":
            argv += ["--predictions", self.predictions]
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True)
        shutil.rmtree(argv[argv.index("--cache") + 1], ignore_errors=True)
        if p.returncode not in (0, 1):
            raise MsbError(f"summary pass {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
        rep = json.loads(p.stdout)
        results = rep.get("results") if verb == "eval" else [x for v in rep.get("validations", [])
                                                              for x in (v["gold"], v["empty"])]
        fresh = [r["instance_id"] for r in results or []
                 if not r.get("resumed") and r.get("outcome") != "empty_patch"]
        if fresh:
            raise MsbError(f"the summary pass evaluated {fresh} again: their stored results did not match")
        rep["summary_seconds"] = time.monotonic() - t0
        return rep


def evaluate(daemons: Daemons, *, dataset: str, run_id: str, out: str, predictions: str = "gold",
             spec: str = "", keep_errors: bool = False, progress: Optional[Callable[[str], None]] = None
             ) -> Dict[str, Any]:
    """Evaluate predictions (a file, or "gold") over the cluster, as
    ``msb eval`` does on one node; the run report (msb eval --json)."""
    return ClusterRun(daemons, dataset, run_id, out, kind="evaluation", predictions=predictions, spec=spec,
                      keep_errors=keep_errors, progress=progress).run()


def validate(daemons: Daemons, *, dataset: str, run_id: str, out: str, spec: str = "",
             keep_errors: bool = False, progress: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """Validate every instance over the cluster, as ``msb validate`` does."""
    return ClusterRun(daemons, dataset, run_id, out, kind="validation", spec=spec, keep_errors=keep_errors,
                      progress=progress).run()
