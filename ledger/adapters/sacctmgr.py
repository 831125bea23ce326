"""Slurm's association tree (``sacctmgr show assoc --parsable2``) and node GPUs (``sinfo``) to a budgets file.

Input: the output of ``sacctmgr --parsable2 show assoc format=Cluster,Account,ParentName,User,Fairshare,GrpTRES``
(header ``Cluster|Account|Par Name|User|Share|GrpTRES``), of ``show assoc tree`` (accounts indented by
depth), or of the default columns (``Cluster|Account|User|Partition|Share|...``; with ``--noheader``
the 20 default columns, or the 19 of releases without ``Priority``). ``--parsable`` (a trailing
``|``) is accepted too. Columns read: Cluster, Account, Par Name, User, Share, GrpTRES.

* **Accounts** are the rows without a User. An account's parent is its ``Par Name``; in tree output
  its indentation says it; with neither, every account hangs below ``root``. The ``root`` account
  is the cluster itself: its children are the tree's top nodes, and its user rows (the ``root``
  user) are left out.
* **Users** are the rows with a User: a user with a number in ``Share`` is a node below its account
  (its records charge it); a user with ``Share`` = ``parent`` uses the account's share, so it gets no
  node and its records charge the account. Rows repeated per partition count once.
* **Shares** are the raw ``Share`` numbers, normalised among siblings as Slurm does. An account with
  ``Share`` = ``parent`` has its children reparented, for fair share, to the first ancestor that has a
  share of its own. It stays a node (its records must still find it) with the sum of its children's
  shares, which gives each child exactly the fraction the reparenting gives it.
* **Capacity**: ``--gpus N``, or the GPUs ``sinfo -o '%n %G'`` output lists (host lists expanded,
  each host counted once), or else ``gres/gpu`` in the ``root`` association's GrpTRES.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ledger.adapters.common import budget_path, level_names
from ledger.adapters.hostlist import expand_hostlist
from ledger.budgets import BudgetNode, Budgets
from ledger.errors import InputError

__all__ = ["SlurmTree", "parse_sacctmgr", "parse_sinfo", "slurm_budgets"]

DEFAULT_COLUMNS = (
    "Cluster", "Account", "User", "Partition", "Share", "Priority", "GrpJobs", "GrpTRES", "GrpSubmit", "GrpWall",
    "GrpTRESMins", "MaxJobs", "MaxTRES", "MaxTRESPerNode", "MaxSubmit", "MaxWall", "MaxTRESMins", "QOS", "Def QOS",
    "GrpTRESRunMins",
)  # fmt: skip
_ALIASES = {"par name": "parentname", "parentname": "parentname", "share": "share", "fairshare": "share"}
_GPU = re.compile(r"gres/gpu(?::[^=,]+)?=(\d+)")
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)")


@dataclass
class _Account:
    name: str
    parent: str | None
    share: float | None  # None: Share=parent
    line: int
    users: dict[str, float | None] = field(default_factory=dict)


@dataclass
class SlurmTree:
    """The association tree of one cluster as sacctmgr printed it."""

    cluster: str
    accounts: dict[str, _Account]
    root_gpus: int | None
    notes: list[str]
    file: str = "<sacctmgr output>"


def _share(text: str, where: str) -> float | None:
    t = text.strip()
    if t.lower() == "parent":
        return None
    if not t:
        return 1.0
    try:
        value = float(t)
    except ValueError:
        raise InputError(f"{where}: Share {text!r}: expected a number or 'parent'") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: Share {text!r}: expected a number of at least 0")
    return value


def _tres_gpus(text: str) -> int | None:
    found = [int(m.group(1)) for m in _GPU.finditer(text)]
    return max(found) if found else None


def parse_sacctmgr(text: str, file: str, cluster: str | None = None) -> SlurmTree:
    """Read ``sacctmgr show assoc`` parsable output; raise InputError naming file, line, column and value."""
    lines = [(n, line.rstrip("\r\n")) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise InputError(f"{file}: empty: expected sacctmgr --parsable2 show assoc output")
    first = lines[0][1].split("|")
    if first and first[-1] == "":
        first = first[:-1]
    if any(c.strip().lower() == "account" for c in first):
        names = [c.strip() for c in first]
        rows = lines[1:]
    else:
        width = len(first)
        if width == len(DEFAULT_COLUMNS):
            names = list(DEFAULT_COLUMNS)
        elif width == len(DEFAULT_COLUMNS) - 1:
            names = [c for c in DEFAULT_COLUMNS if c != "Priority"]
        else:
            raise InputError(
                f"{file}:{lines[0][0]}: no header and {width} columns: run sacctmgr without --noheader "
                "(or with the default format)"
            )
        rows = lines
    idx = {_ALIASES.get(c.lower(), c.lower()): i for i, c in enumerate(names)}
    missing = [c for c in ("account", "user") if c not in idx]
    if missing:
        raise InputError(f"{file}:1: header lacks column(s) {', '.join(missing)} (found {'|'.join(names)})")
    parsed: list[tuple[int, list[str]]] = []
    for n, line in rows:
        f = line.split("|")
        if len(f) == len(names) + 1 and f[-1] == "":
            f.pop()
        if len(f) != len(names):
            raise InputError(f"{file}:{n}: expected {len(names)} '|'-separated fields, found {len(f)}")
        parsed.append((n, f))

    def col(f: list[str], name: str) -> str:
        i = idx.get(name)
        return f[i] if i is not None else ""

    clusters = sorted({col(f, "cluster").strip() for _, f in parsed} - {""})
    if cluster is None:
        if len(clusters) > 1:
            raise InputError(f"{file}: associations of {len(clusters)} clusters ({', '.join(clusters)}): "
                             "give --cluster NAME")
        cluster = clusters[0] if clusters else None
    elif clusters and cluster not in clusters:
        raise InputError(f"{file}: no association of cluster {cluster!r} (found {', '.join(clusters)})")
    if cluster is None:
        raise InputError(f"{file}: no Cluster column: give --cluster NAME")
    accounts: dict[str, _Account] = {}
    notes: list[str] = []
    stack: list[tuple[int, str]] = []  # (indent, account) of tree output
    root_gpus: int | None = None
    user_rows: list[tuple[int, str, str, float | None]] = []
    skipped_root_users = 0
    for n, f in parsed:
        if clusters and col(f, "cluster").strip() != cluster:
            continue
        where = f"{file}:{n}"
        raw_account = col(f, "account")
        account = raw_account.strip()
        if not account:
            raise InputError(f"{where}: Account is empty")
        user = col(f, "user").strip()
        share = _share(col(f, "share"), where)
        if user:
            if account == "root":
                skipped_root_users += 1
                continue
            user_rows.append((n, account, user, share))
            continue
        if account in accounts:
            continue  # the same account on another partition
        indent = len(raw_account) - len(raw_account.lstrip(" "))
        parent = col(f, "parentname").strip() or None
        if "parentname" not in idx and account != "root":
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1] if stack else "root"
        stack.append((indent, account))
        if account == "root":
            root_gpus = _tres_gpus(col(f, "grptres"))
            parent = None
        accounts[account] = _Account(account, parent, share, n)
    for a in accounts.values():
        if a.parent is not None and a.parent not in accounts:
            raise InputError(f"{file}:{a.line}: account {a.name!r}: parent {a.parent!r} has no row of its own")
    for a in accounts.values():  # a loop of parents would leave its accounts out of the tree unsaid
        chain = [a.name]
        up = a.parent
        while up is not None and up != "root":
            if up in chain:
                raise InputError(f"{file}:{a.line}: account {a.name!r}: is its own ancestor "
                                 f"({' -> '.join([*chain, up])})")
            chain.append(up)
            up = accounts[up].parent
    child_accounts = {(a.parent, budget_path(a.name)) for a in accounts.values()}
    for n, account, user, share in user_rows:
        acct = accounts.get(account)
        if acct is None:
            raise InputError(f"{file}:{n}: user {user!r} belongs to account {account!r}, which has no row of its own")
        if share is not None and (account, budget_path(user)) in child_accounts:
            raise InputError(f"{file}:{n}: user {user!r} of account {account!r} has the name of a sub-account of "
                             "it: both would be one budget node")
        acct.users.setdefault(user, share)
    if skipped_root_users:
        notes.append(f"{skipped_root_users} user association(s) of the root account left out (administrators)")
    return SlurmTree(cluster, accounts, root_gpus, notes, file)


def parse_sinfo(text: str, file: str) -> tuple[int, int]:
    """Return (GPUs, GPUs per host) from ``sinfo -o '%n %G'`` output (host lists expanded, each host once)."""
    per_host: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or (n == 1 and parts[0].upper() in ("HOSTNAMES", "NODELIST")):
            continue
        if len(parts) != 2:
            raise InputError(f"{file}:{n}: expected 'HOSTNAMES GRES' (sinfo -o '%n %G'), found {line.strip()!r}")
        hostlist, gres = parts
        try:
            hosts = expand_hostlist(hostlist)  # without -N, sinfo prints each group of alike hosts as a host list
        except ValueError as exc:
            raise InputError(f"{file}:{n}: host list {hostlist!r}: {exc}") from None
        gpus = sum(int(m.group(1)) for m in _GRES_GPU.finditer(gres)) if gres != "(null)" else 0
        for host in hosts:
            per_host[host] = max(per_host.get(host, 0), gpus)
    counts = [g for g in per_host.values() if g > 0]
    if not counts:
        raise InputError(f"{file}: no host with GPUs (gres gpu:...) found")
    return sum(counts), math.gcd(*counts)


def slurm_budgets(tree: SlurmTree, gpus: int, gpus_per_node: int) -> tuple[Budgets, list[str]]:
    """Return the budgets the association tree stands for, and notes on what was read."""
    notes = list(tree.notes)
    accts = tree.accounts
    children: dict[str | None, list[str]] = {}
    for a in accts.values():
        children.setdefault(a.parent, []).append(a.name)

    def own_shares(name: str) -> float:
        """Return the share an account stands for among its siblings (Share=parent: its children's sum)."""
        a = accts[name]
        if a.share is not None:
            return a.share
        total = sum(own_shares(c) for c in children.get(name, [])) + sum(
            s for s in a.users.values() if s is not None
        )
        return total

    nodes: list[BudgetNode] = []
    users: set[str] = set()  # paths of user nodes (the rest are accounts)
    parent_accounts = [a.name for a in accts.values() if a.share is None and a.name != "root"]
    parent_users = 0

    def walk(name: str, prefix: str) -> None:
        nonlocal parent_users
        path = f"{prefix}/{budget_path(name)}" if prefix else budget_path(name)
        nodes.append(BudgetNode(path, own_shares(name), ()))
        for child in children.get(name, []):
            walk(child, path)
        for user, share in accts[name].users.items():
            if share is None:
                parent_users += 1
                continue
            nodes.append(BudgetNode(f"{path}/{budget_path(user)}", share, ()))
            users.add(nodes[-1].path)

    for top in children.get("root", []) + [a for a in children.get(None, []) if a != "root"]:
        walk(top, "")
    if not nodes:
        raise InputError(f"{tree.file}: the association tree has no account below root")
    if parent_accounts:
        notes.append(f"Share=parent accounts (share = their children's sum): {', '.join(parent_accounts)}")
    mixed = sorted(a.name for a in accts.values()
                   if any(v is None for v in a.users.values()) and any(v is not None for v in a.users.values()))
    if mixed:
        notes.append(f"accounts with users of both kinds (the Share=parent ones charge the account itself, "
                     f"a team owed what its users' nodes leave of its share): {', '.join(mixed)}")
    if parent_users:
        notes.append(f"{parent_users} Share=parent user association(s): no node, their records charge the account")
    if gpus % gpus_per_node:
        gpus_per_node = math.gcd(gpus, gpus_per_node)
    # Accounts are the team allocations (a user's jobs charge its account's share): the team level is the
    # deepest level of accounts only.
    kinds: list[set[str]] = []
    for n in nodes:
        depth = n.path.count("/")
        kinds.extend(set() for _ in range(depth + 1 - len(kinds)))
        kinds[depth].add("user" if n.path in users else "account")
    levels = level_names(kinds, "account", "user")
    team = max(d for d, k in enumerate(kinds) if k == {"account"})
    notes.append(f"levels: {', '.join(levels)}; team level {levels[team]} (accounts are the team allocations)")
    return Budgets(budget_path(tree.cluster), gpus, gpus_per_node, tuple(nodes), levels, levels[team]), notes


def read_text(path: str | Path) -> str:
    """Return a file's text; InputError naming the file if it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")  # -sig: a byte-order mark, if any, is not text
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
