"""Where each rank runs, and what happens when its node leaves the cluster.

A run has k ranks, one per part, for its whole life: rank r loads part r, draws the
streams of rank r and runs rank r's share of every global batch. The first group is
placed by Ray (one placement group, strategy ``PACK``); from then on every rank is pinned
to the node it ran on (a bundle label selector on Ray's ``ray.io/node-id`` label), so a
restarted group finds its parts where they were.

When a failed worker's node has left the cluster (``cluster_utils.remove_node``, a spot
instance reclaimed, a hardware fault), :func:`place` waits up to
``cluster.replace_timeout_s`` for a new node to join and pins the lost ranks there. If
none joins, ``cluster.on_worker_loss`` decides: ``restart`` ends the run with
:class:`NodeLost`, naming the ranks and the node; ``shrink`` pins each lost rank to the
surviving node that runs the fewest ranks. The ranks, parts, global batch, steps per
epoch and random streams are those of k ranks either way, so a shrunk run ends with the
parameters of an undisturbed one; the cost is that one node runs two ranks' work.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import asdict, dataclass

NODE_LABEL = "ray.io/node-id"
"""The label Ray gives every node (its node id): what a bundle is pinned with."""


@dataclass(frozen=True)
class Move:
    """Rank ``rank`` (which owns part ``rank``) left ``from_node`` for ``to_node``: a node
    that joined (``replaced``) or a surviving node that now runs several ranks (``shrunk``)."""

    rank: int
    from_node: str
    to_node: str
    kind: str

    def to_dict(self) -> dict[str, object]:
        return {"part": self.rank, **asdict(self)}


@dataclass(frozen=True)
class Placement:
    """The node of every rank, the ranks that moved, and the seconds spent waiting for a
    new node."""

    nodes: list[str]
    moves: list[Move]
    waited_s: float = 0.0


class NodeLost(RuntimeError):
    """Ranks whose node left the cluster could not be placed again."""

    def __init__(self, ranks: list[int], nodes: list[str], waited_s: float, mode: str) -> None:
        what = ", ".join(f"worker {r} (part {r}) on node {n}" for r, n in zip(ranks, nodes, strict=True))
        fix = ("set cluster.on_worker_loss=shrink to go on with the surviving nodes" if mode == "restart"
               else "no surviving node has CPUs to run them")
        super().__init__(f"{what}: the node left the cluster and no new node joined within "
                         f"{waited_s:.0f}s (cluster.replace_timeout_s); {fix}")
        self.ranks = ranks
        self.nodes = nodes


def alive_nodes() -> dict[str, float]:
    """The id and CPU count of every live node that has CPUs."""
    import ray

    return {n["NodeID"]: float(n["Resources"].get("CPU", 0.0)) for n in ray.nodes()
            if n["Alive"] and n["Resources"].get("CPU", 0.0) > 0}


def plan(prev: list[str], alive: dict[str, float], shrink: bool) -> list[Move] | None:
    """The moves that place every rank of ``prev`` on a live node: the ranks of each lost
    node go together to a live node that runs no rank; with ``shrink``, when there are too
    few such nodes, each lost rank goes to the surviving node running the fewest ranks
    (lowest rank's node first). None when neither is possible."""
    lost_nodes = sorted({n for n in prev if n not in alive}, key=prev.index)
    if not lost_nodes:
        return []
    spare = [n for n in sorted(alive) if n not in prev]
    if len(spare) >= len(lost_nodes):
        to = dict(zip(lost_nodes, spare, strict=False))
        return [Move(r, n, to[n], "replaced") for r, n in enumerate(prev) if n in to]
    survivors = [n for n in dict.fromkeys(prev) if n in alive]  # in rank order
    if not shrink or not survivors:
        return None
    load = Counter(n for n in prev if n in alive)
    moves = []
    for r, n in enumerate(prev):
        if n in alive:
            continue
        target = min(survivors, key=lambda s: (load[s], survivors.index(s)))
        load[target] += 1
        moves.append(Move(r, n, target, "shrunk"))
    return moves


def place(prev: list[str], mode: str, timeout_s: float, poll_s: float = 0.5) -> Placement:
    """The node of every rank for the next group: ``prev`` where its node is alive; for a
    lost node, a new node within ``timeout_s``, else (``mode='shrink'``) a surviving one.
    Raises :class:`NodeLost` when the lost ranks cannot be placed."""
    t0 = time.monotonic()
    while True:
        alive = alive_nodes()
        waited = time.monotonic() - t0
        moves = plan(prev, alive, shrink=False)
        if moves is None and waited >= timeout_s:
            moves = plan(prev, alive, shrink=mode == "shrink")
            if moves is None:
                lost = [r for r, n in enumerate(prev) if n not in alive]
                raise NodeLost(lost, [prev[r] for r in lost], waited, mode)
        if moves is not None:
            nodes = list(prev)
            for m in moves:
                nodes[m.rank] = m.to_node
            return Placement(nodes, moves, waited if moves else 0.0)
        time.sleep(poll_s)


def bundle_cpus(nodes: list[str], cpus: dict[str, float], per: float) -> list[float]:
    """CPUs of each rank's bundle: ``per``, or an equal share of its node's CPUs where the
    node runs more ranks than it has room for at ``per`` each."""
    count = Counter(nodes)
    # Ray counts resources in units of 1e-4: round down so that the shares fit the node
    return [min(per, math.floor(cpus.get(n, per) / count[n] * 1e4) / 1e4) for n in nodes]
