"""``python -m msb.ray eval|validate``: a batch run over a running Ray cluster.

Every node that publishes ``msb_sandbox`` gets a daemon (started by a
NodeDaemon actor, or attached to), the run is spread over them, and the
harness's files and summary land in ``--out`` as ``msb eval`` writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

import ray

from .eval import evaluate, validate
from .node import Daemons, NodeConfig


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
    ap.add_argument("--msb", default="msb", help="the msb binary on the nodes")
    ap.add_argument("--keep-errors", action="store_true")
    ap.add_argument("--serve-arg", action="append", default=[], help="one more msb serve flag (repeatable)")
    a = ap.parse_args(argv)
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
    json.dump(rep, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
