"""Where an instance's sandbox goes: placement by cache affinity.

A **Placer** knows, per node, its sandbox slots and how many are taken by
the driver's work, and which layer refs each node's cache holds (from the
daemons' ``/v1/instances/{id}/layers``, plus what the driver learnt since:
a node that ran an instance now holds its layers; one that is building an
environment will hold it). ``place`` answers with a **Placement**:

1. a node holding every layer, with a free slot (the one with most room);
2. else, when every missing layer is held by some node (a **source**), the
   freest node, which pulls the missing refs from the source before
   anything runs (so an environment is built once per cluster, not once per
   node);
3. else, when a missing layer is being built on a node now, nothing yet
   (wait for that build, then pull it);
4. else the freest node, which builds the missing layers (and is recorded
   as building them).

No Ray here: the logic is tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set


@dataclass
class Placement:
    """Run on ``node``; first pull ``pull`` refs from node ``source``;
    ``build`` are the refs nobody has (the node builds them)."""

    node: str
    source: str = ""
    pull: List[str] = field(default_factory=list)
    build: List[str] = field(default_factory=list)


@dataclass
class _Node:
    slots: int
    used: int = 0
    refs: Set[str] = field(default_factory=set)
    building: Set[str] = field(default_factory=set)

    @property
    def free(self) -> int:
        return self.slots - self.used


class Placer:
    """Placement state of the driver (one thread)."""

    def __init__(self, slots: Dict[str, int]) -> None:
        self.nodes: Dict[str, _Node] = {nid: _Node(slots=n) for nid, n in slots.items()}

    def learn(self, node: str, present: List[str]) -> None:
        """Record refs a node's cache holds."""
        if node in self.nodes:
            self.nodes[node].refs.update(present)
            self.nodes[node].building.difference_update(present)

    def remove(self, node: str) -> None:
        """Forget a node (it died): its builds are nobody's now."""
        self.nodes.pop(node, None)

    def place(self, refs: List[str]) -> Optional[Placement]:
        """Where to run work needing ``refs``; None: wait (no free slot, or
        a missing layer is being built elsewhere)."""
        free = [nid for nid, n in self.nodes.items() if n.free > 0]
        if not free:
            return None
        # Most room first; ties by node id, so placement is deterministic.
        free.sort(key=lambda nid: (-self.nodes[nid].free, nid))
        holders = [nid for nid in free if set(refs) <= self.nodes[nid].refs]
        if holders:
            return Placement(node=holders[0])
        target = free[0]
        missing = [r for r in refs if r not in self.nodes[target].refs]
        if any(r in self.nodes[target].building for r in missing):
            return Placement(node=target)  # it is building them itself: queue behind it
        sources = [nid for nid, n in self.nodes.items() if nid != target and set(missing) <= n.refs]
        if sources:
            return Placement(node=target, source=sorted(sources)[0], pull=missing)
        if any(r in n.building for n in self.nodes.values() for r in missing):
            return None
        return Placement(node=target, build=missing)

    def take(self, p: Placement) -> None:
        """The placed work starts: a slot is taken, builds are recorded."""
        n = self.nodes[p.node]
        n.used += 1
        n.building.update(p.build)

    def release(self, node: str, refs: List[str], ok: bool) -> None:
        """The work ended; when it ran, the node holds its layers now."""
        n = self.nodes.get(node)
        if n is None:
            return
        n.used -= 1
        if ok:
            self.learn(node, refs)
        else:
            n.building.difference_update(refs)
