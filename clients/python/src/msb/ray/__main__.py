"""``python -m msb.ray eval|validate``: a batch run over a running Ray cluster.

Every node that publishes ``msb_sandbox`` gets a daemon (started by a
NodeDaemon actor, or attached to), the run is spread over them, and the
harness's files and summary land in ``--out`` as ``msb eval`` writes them.
Relative paths are taken from the current directory. The outcome is a table
of counts per model (``--json``: the whole report, as ``msb eval --json``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Dict, List, Optional, Sequence

import ray

from .eval import evaluate, validate
from .node import Daemons, NodeConfig

#: the columns of the evaluation table: (heading, key of the run summary)
EVAL_COLUMNS = [("instances", "total_instances"), ("resolved", "resolved_instances"),
                ("unresolved", "unresolved_instances"), ("empty patch", "empty_patch_instances"),
                ("errors", "error_instances"), ("infra failures", "infra_failure_instances")]


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows under a header, the first column left-aligned, the rest right."""
    cells = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     .rstrip() for r in cells)


def eval_table(rep: Dict[str, Any]) -> str:
    """An evaluation report (msb eval --json) as counts per model."""
    rows = [[s.get("model_name_or_path", "")] + [s.get(k, 0) for _, k in EVAL_COLUMNS]
            for s in rep.get("summaries") or []]
    return table(["model"] + [h for h, _ in EVAL_COLUMNS], rows)


def validate_table(rep: Dict[str, Any]) -> str:
    """A validation report (msb validate --json) as counts, then why each
    invalid instance is."""
    out = table(["instances", "valid", "invalid", "errored"],
                [[len(rep.get("validations") or []), len(rep.get("valid") or []), len(rep.get("invalid") or {}),
                  len(rep.get("errored") or [])]])
    invalid = rep.get("invalid") or {}
    if invalid:
        out += "\n\n" + table(["invalid instance", "why"], sorted(invalid.items()))
    return out


def report_text(verb: str, rep: Dict[str, Any]) -> str:
    """The report as a table, then where its files are."""
    text = eval_table(rep) if verb == "eval" else validate_table(rep)
    files = rep.get("files") or {}
    if files:
        text += "\n\n" + "\n".join(f"{k}: {v}" for k, v in sorted(files.items()))
    return text


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``python -m msb.ray`` (and ``msb-ray``)."""
    ap = argparse.ArgumentParser(prog="python -m msb.ray", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", choices=["eval", "validate"])
    ap.add_argument("--address", default="auto", help="Ray cluster address (default: auto)")
    ap.add_argument("--dataset", required=True, help="dataset file (the same path on every node)")
    ap.add_argument("--spec", default="", help="spec file (the same path on every node)")
    ap.add_argument("--predictions", default="gold", help="predictions file, or gold (eval)")
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--out", default="logs/run_evaluation")
    ap.add_argument("--base-dir", required=True, help="node-local directory for each daemon's cache, state, out")
    ap.add_argument("--msb", default="msb", help="the msb binary on the nodes (a bare name: each node's PATH)")
    ap.add_argument("--keep-errors", action="store_true")
    ap.add_argument("--serve-arg", action="append", default=[], help="one more msb serve flag (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the whole report as JSON instead of a table")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    ray.init(address=a.address, namespace="msb")
    daemons = Daemons.start(NodeConfig(base_dir=a.base_dir, msb=a.msb, dataset=a.dataset, spec=a.spec,
                                       serve_args=a.serve_arg))
    try:
        say = lambda line: print(line, file=sys.stderr)  # noqa: E731
        if a.verb == "eval":
            rep = evaluate(daemons, dataset=a.dataset, run_id=a.run_id, out=a.out, predictions=a.predictions,
                           spec=a.spec, keep_errors=a.keep_errors, progress=say)
        else:
            rep = validate(daemons, dataset=a.dataset, run_id=a.run_id, out=a.out, spec=a.spec,
                           keep_errors=a.keep_errors, progress=say)
    finally:
        daemons.stop()
    if a.json:
        json.dump(rep, sys.stdout, indent=2)
        print()
    else:
        print(report_text(a.verb, rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
