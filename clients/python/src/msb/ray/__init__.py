"""msb on Ray: one daemon per node, placement by cache affinity, batch
evaluation over the cluster (``docs/ray.md``).

- ``node_resources(sandboxes, io)``: the custom resources a node publishes.
- ``Daemons.start(NodeConfig(...))``: a NodeDaemon actor per node, each
  starting (or attaching to) that node's ``msb serve`` and ``msb cache serve``.
- ``local_client()``: inside a Ray task or actor, a client of this node's daemon.
- ``Daemons.fork_snapshot(name, n)``: fork a named snapshot on the node that
  holds it (or pull it to the freest node first); returns the node and children.
- ``sandbox_options()``: ``.options(**sandbox_options())`` to place a task
  where a daemon has a free sandbox slot.
- ``evaluate(...)`` / ``validate(...)``: the same run and files as
  ``msb eval`` / ``msb validate``, over every node (``python -m msb.ray``).
"""

from .eval import ClusterRun, evaluate, load_predictions, validate
from .node import IO, NAMESPACE, SANDBOX, Daemons, NodeConfig, NodeDaemon, NodeInfo, local_client, node_resources, sandbox_options
from .placement import Placement, Placer

__all__ = ["ClusterRun", "evaluate", "validate", "load_predictions", "IO", "NAMESPACE", "SANDBOX",
           "Daemons", "NodeConfig", "NodeDaemon", "NodeInfo", "local_client", "node_resources", "sandbox_options",
           "Placement", "Placer"]
