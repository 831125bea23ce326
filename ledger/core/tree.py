"""The budget tree: nodes, manager-set shares versioned in time, normalised fractions, who may change what.

Costs: defining a node or changing a share is O(nodes) (fractions of the whole tree are
recomputed; trees hold hundreds of nodes and change rarely); ``fraction(path)`` is O(1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.core.pickling import field_state, rebuilt_from_fields, set_fields

__all__ = ["BudgetNode", "BudgetTree"]


@dataclass(slots=True)
class BudgetNode:
    """One budget node: its raw share of the parent's time, its managers and its share history."""

    path: str
    parent: str | None
    share: float
    managers: tuple[str, ...]
    depth: int
    children: list[str] = field(default_factory=list)  # sorted by path (deterministic walks)
    history: list[tuple[int, float, str]] = field(default_factory=list)  # (time_us, share, event_id)
    fraction: float = 0.0  # product of normalised shares down from the root: its part of the cluster

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return rebuilt_from_fields(self)


class BudgetTree:
    """Every defined budget node; fractions are kept normalised among siblings."""

    def __init__(self) -> None:
        self.nodes: dict[str, BudgetNode] = {}
        self.roots: list[str] = []
        self._chains: dict[str, list[str]] = {}  # path -> itself and its ancestors (nodes never move)
        self._branches: dict[tuple[str, str], tuple[str | None, str | None]] = {}  # derived: see branches()
        self.team_depth: int | None = None  # the team level's depth, when the budgets name their levels

    def __getstate__(self) -> dict[str, object]:
        # ``_branches`` is derived, and only as large as the pairs asked for: never part of a snapshot
        return field_state(self, ("nodes", "roots", "_chains", "team_depth"))

    def __setstate__(self, state: dict[str, object]) -> None:
        set_fields(self, state)
        self._branches = {}

    def __contains__(self, path: str) -> bool:
        return path in self.nodes

    def define(
        self, path: str, parent: str | None, share: float, managers: tuple[str, ...], time_us: int, event_id: str
    ) -> bool:
        """Add a node (a parent not yet defined is created implicitly with share 1); return False if it exists.

        A redefinition (the same path again) only updates its managers: shares change
        through allocation events, which are checked against the managers.
        """
        if parent is None and "/" in path:
            parent = path.rsplit("/", 1)[0]
        if path in self.nodes:
            node = self.nodes[path]
            if managers and managers != node.managers:
                node.managers = managers
            return False
        if parent is not None and parent not in self.nodes:
            self.define(parent, None, 1.0, (), time_us, event_id)
        depth = 0 if parent is None else self.nodes[parent].depth + 1
        node = BudgetNode(path, parent, share, tuple(managers), depth, history=[(time_us, share, event_id)])
        self.nodes[path] = node
        siblings = self.roots if parent is None else self.nodes[parent].children
        siblings.append(path)
        siblings.sort()
        self._renormalise()
        return True

    def may_change(self, path: str, who: str) -> bool:
        """Return whether ``who`` manages ``path`` or one of its ancestors (O(depth))."""
        p: str | None = path
        while p is not None:
            node = self.nodes[p]
            if who in node.managers:
                return True
            p = node.parent
        return False

    def set_share(self, path: str, share: float, time_us: int, event_id: str) -> None:
        """Apply an (already authorised) share change from ``time_us`` on."""
        node = self.nodes[path]
        node.share = share
        node.history.append((time_us, share, event_id))
        self._renormalise()

    def share_at(self, path: str, time_us: int) -> float:
        """Return the raw share a node had at ``time_us`` (its versioned history)."""
        current = 0.0
        for t, share, _ in self.nodes[path].history:
            if t > time_us:
                break
            current = share
        return current

    def applied(self, path: str, event_id: str) -> bool:
        """Return whether an allocation event was already applied to ``path`` (idempotency)."""
        return any(eid == event_id for _, _, eid in self.nodes[path].history)

    def fraction(self, path: str) -> float:
        """Return a node's part of the whole cluster: its normalised shares multiplied down the tree."""
        return self.nodes[path].fraction

    def ancestors(self, path: str) -> list[str]:
        """Return the path itself and every ancestor, leaf first (O(1) once cached; do not modify)."""
        chain = self._chains.get(path)
        if chain is None:
            chain = []
            p: str | None = path
            while p is not None:
                chain.append(p)
                p = self.nodes[p].parent
            self._chains[path] = chain
        return chain

    def name_team_level(self, path: str) -> None:
        """Take ``path``'s depth as the team level's (the budgets file names it, ``levels:`` and ``team_level:``)."""
        self.team_depth = self.nodes[path].depth

    def team(self, path: str) -> str:
        """Return the team ``path`` is charged under: its ancestor at the team level, or itself (no level named).

        O(1) once its chain is cached (``ancestors``).
        """
        chain = self.ancestors(path)
        depth = self.team_depth
        if depth is None or len(chain) - 1 <= depth:
            return path
        return chain[len(chain) - 1 - depth]

    def branches(self, a: str, b: str) -> tuple[str | None, str | None]:
        """Return the children of the lowest common ancestor of ``a`` and ``b`` on each one's side.

        ``None`` on a side means that path is the common ancestor itself (the same node, or an
        ancestor of the other). O(depth) the first time, O(1) after (nodes never move).
        """
        pair = self._branches.get((a, b))
        if pair is None:
            x, y = self.ancestors(a)[::-1], self.ancestors(b)[::-1]
            i = 0
            while i < len(x) and i < len(y) and x[i] == y[i]:
                i += 1
            pair = self._branches[(a, b)] = (x[i] if i < len(x) else None, y[i] if i < len(y) else None)
        return pair

    def children_of(self, path: str | None) -> list[str]:
        """Return the children of a node (or the roots for None), sorted by path."""
        return self.roots if path is None else self.nodes[path].children

    def _renormalise(self) -> None:
        # Shares are relative among siblings: normalise at every level, multiply downwards.
        def walk(names: list[str], above: float) -> None:
            total = sum(self.nodes[n].share for n in names)
            for n in names:
                node = self.nodes[n]
                node.fraction = above * (node.share / total) if total > 0 else 0.0
                walk(node.children, node.fraction)

        walk(self.roots, 1.0)
