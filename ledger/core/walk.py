"""The preemption walk: allocated waiters in fair-share order, with what the walk has passed.

``preemption.preempt_once`` walks the fair-share tree depth first in ranking order and tries the
waiters of each node it reaches. Subtrees with no allocated waiter, or holding only sizes the
caller no longer wants, are passed over whole; the walker counts the past-protection GPUs of
everything passed, which no later waiter may preempt (they rank ahead of it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ledger.core.fairshare import ALLOCATED, FairShareOrder
from ledger.core.queues import SizedQueue

__all__ = ["Walker", "own_exposed", "walk_allocated"]


def walk_allocated(
    order: FairShareOrder, t: int, wanted: Callable[[dict[int, int]], bool] = lambda sizes: True
) -> Iterator[tuple[str, SizedQueue, int, Walker]]:
    """Yield (node, its allocated queue, waiting ahead, walker) in fair-share order, for preemption.

    The walker counts the past-protection GPUs of the work ranked before the yielded node
    (an upper bound on what its waiters may preempt). Subtrees without allocated waiters are
    passed over whole (O(1) each), and so are subtrees whose waiting sizes ``wanted`` rejects
    (checked as the walk goes), so a walk is O(visited nodes) plus one ranking per visited
    internal node (O(b log b), shared by every walk of the instant until a meter changes).
    """
    walker = Walker(order, t, wanted)
    return walker.visit(None)


def own_exposed(order: FairShareOrder) -> dict[str, int]:
    """Return per node the exposed GPUs of work charged to the node itself (O(1); O(nodes) once restored).

    Kept by ``Occupancy.exposed_changed`` as a counter; a restored core has none yet and gets
    it back from the subtree counts: a node's own = its subtree's less its children's subtrees.
    """
    occ = order.occ
    own = occ.own_exposed_cache
    if own is None:
        nodes = occ.nodes
        own = occ.own_exposed_cache = {
            p: nodes[p].exposed - sum(nodes[c].exposed for c in node.children)
            for p, node in order.tree.nodes.items()
            if p in nodes
        }
    return own


class Walker:
    """A preemption walk in progress: what it has passed (the past-protection GPUs ranked before the current waiter).

    A class whose method recurses, not a recursive closure: a compiled closure forms a reference
    cycle, and a pass makes a walk at most instants.
    """

    __slots__ = ("ahead", "nodes", "occ_nodes", "order", "own_gpus", "passed_exposed", "queues", "sizes", "t",
                 "totals", "wanted")

    def __init__(self, order: FairShareOrder, t: int, wanted: Callable[[dict[int, int]], bool]) -> None:
        self.order, self.t, self.wanted = order, t, wanted
        self.totals, self.sizes, self.queues = order.totals[ALLOCATED], order.sizes[ALLOCATED], order.queues
        self.nodes, self.occ_nodes = order.tree.nodes, order.occ.nodes
        self.own_gpus = own_exposed(order)
        self.ahead = 0  # allocated waiters ranked before the node yielded
        self.passed_exposed = 0  # past-protection GPUs in passed subtrees: no longer preemptible

    def visit(self, parent: str | None) -> Iterator[tuple[str, SizedQueue, int, Walker]]:
        """Yield the nodes under ``parent`` in the walk's order (see ``walk_allocated``)."""
        totals, occ_nodes = self.totals, self.occ_nodes
        for p in self.order.ranked_children(parent, self.t):
            waiting = totals.get(p)
            if not waiting or not self.wanted(self.sizes[p]):
                self.passed_exposed += occ_nodes[p].exposed
                self.ahead += waiting or 0
                continue
            own = self.queues.get((p, ALLOCATED))
            if own is not None and own.keys:
                yield p, own, self.ahead, self
                self.ahead += len(own.keys)
            if self.nodes[p].children:
                yield from self.visit(p)
            # the whole subtree is now ranked before what comes next: add its own work's GPUs
            # (its children's were added as they were passed)
            self.passed_exposed += self.own_gpus.get(p, 0)
