"""Folding a path too big to read into pictures a person can read.

Name scopes, and runs of one op type inside a scope, are groups; each group is one
box until it is opened. The whole path's picture opens groups level by level, those
of one size together, while it stays within its budget of boxes, and past the
budget when that is what it takes to show at least MIN_BOXES. A node with a mark
that matters (a blocker, an override, a surrogate, a bypass) keeps its own box
whatever holds it. Each folded box has a picture of its inside, folded the same way,
which the page opens on a click.
"""

import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

MIN_BOXES = 10  # a picture of fewer boxes says nothing: a group opens past the budget to reach this
RUN = 3  # this many nodes of one op type, in a chain or side by side, fold into one box
PINNED = frozenset({"blocker", "dangling", "override", "surrogate", "bypass"})  # each keeps a box of its own


@dataclass
class View:
    """One picture: the whole path (key "") or the inside of a folded box (its name)."""

    key: str
    nodes: dict = field(default_factory=dict)  # box -> (op line, name line, mark, tooltip)
    edges: set = field(default_factory=set)  # (box, box)
    bodies: dict = field(default_factory=dict)  # call -> (function, boxes inside its body's frame)
    folded: dict = field(default_factory=dict)  # folded box -> the nodes it holds
    opens: dict = field(default_factory=dict)  # folded box -> the key of the view of its inside
    parent: str = ""  # the view whose folded box this one opens


@dataclass
class _Group:
    """A name scope, or a run of one op type inside one."""

    key: str
    depth: int
    box: str  # its box's name: SCOPE/* for a scope, FIRST+N for a run
    run_op: str = ""  # the op type of a run; "" for a scope
    members: list = field(default_factory=list)  # nodes directly inside
    children: list = field(default_factory=list)  # groups directly inside
    size: int = 0  # nodes inside, at any depth
    unpinned: int = 0  # of them, those without a box of their own
    loose: int = 0  # of those directly inside, those without a box of their own


@dataclass
class _Path:
    """The path's nodes and edges, grouped."""

    nodes: dict  # name -> (op, mark, tooltip)
    bodies: dict
    groups: dict  # key -> _Group
    chain: dict  # node -> keys of the groups holding it, outermost first ("" the whole path)
    under: dict  # group key -> the nodes inside it, at any depth, in the path's order
    targets: dict  # node -> the nodes it feeds


def fold(nodes: dict, edges: set, bodies: dict, budget: int, limit: int) -> list[View]:
    """The pictures of a path (``nodes``: name -> (op, mark, tooltip)): the whole
    path's first, within ``budget`` boxes where it can be, then one for each folded
    box, outside in; a folded box whose inside would take more than ``limit`` boxes
    gets none (its tooltip says so)."""
    path = _grouped(nodes, edges, bodies)
    views: list[View] = []
    waiting, parents = deque([""]), {"": ""}
    while waiting:
        key = waiting.popleft()
        view = _view(path, key, budget, limit if key else sys.maxsize)  # the whole path's is always drawn
        if view is None:
            continue
        view.parent = parents[key]
        views.append(view)
        for box in view.folded:
            inside = _group_key(box)
            if inside not in parents:
                parents[inside] = key
                waiting.append(inside)
    drawn = {view.key for view in views}
    for view in views:
        view.opens = {box: _group_key(box) for box in view.folded if _group_key(box) in drawn}
        for box in view.folded:
            top, bottom, mark, tooltip = view.nodes[box]
            view.nodes[box] = (top, bottom, mark, tooltip + ("; in the .html page a click opens it"
                                                             if box in view.opens else
                                                             f"; more than {limit} boxes inside: narrow the "
                                                             "path with --x and --y to draw them"))
    return views


def _group_key(box: str) -> str:
    """The group a folded box stands for: a scope's box is SCOPE/*, a run's its key."""
    return box[:-2] if box.endswith("/*") else box


def _grouped(nodes: dict, edges: set, bodies: dict) -> _Path:
    groups = {"": _Group("", 0, "")}
    chain: dict = {}
    sources_of: dict = {}
    targets: dict = {}
    for source, target in edges:
        sources_of.setdefault(target, set()).add(source)
        targets.setdefault(source, set()).add(target)
    for name in nodes:
        parts = name.split("/")
        keys = [""]
        for depth in range(1, len(parts)):
            key = "/".join(parts[:depth])
            if key not in groups:
                groups[key] = _Group(key, depth, key + "/*")
                groups[keys[-1]].children.append(key)
            keys.append(key)
        groups[keys[-1]].members.append(name)
        chain[name] = keys
    for group in [group for group in groups.values() if len(group.members) >= RUN]:
        for run in _runs(group.members, nodes, sources_of, targets):
            key = f"{run[0]}+{len(run) - 1}"
            groups[key] = _Group(key, group.depth + 1, key, nodes[run[0]][0], run)
            group.children.append(key)
            held = set(run)
            group.members = [name for name in group.members if name not in held]
            for name in run:
                chain[name] = chain[name] + [key]
    under: dict = {key: [] for key in groups}
    for name, keys in chain.items():
        pinned = nodes[name][1] in PINNED
        for key in keys:
            under[key].append(name)
            groups[key].size += 1
            groups[key].unpinned += 0 if pinned else 1
        groups[keys[-1]].loose += 0 if pinned else 1
    return _Path(nodes, bodies, groups, chain, under, targets)


def _runs(members: list, nodes: dict, sources_of: dict, targets_of: dict) -> Iterator[list]:
    """Runs of RUN or more unmarked nodes of one op type among ``members`` (one
    scope's): chains, each feeding only the next, then nodes side by side (the same
    sources and the same consumers)."""
    inside = {name for name in members if not nodes[name][1]}
    sources = {name: sources_of.get(name, set()) for name in inside}
    targets = {name: targets_of.get(name, set()) for name in inside}
    follows = {}
    for name in inside:
        [single] = targets[name] if len(targets[name]) == 1 else [None]
        if single in inside and sources[single] == {name} and nodes[single][0] == nodes[name][0]:
            follows[name] = single
    starts = set(follows) - set(follows.values())
    chained = set()
    for start in sorted(starts):
        run = [start]
        while run[-1] in follows:
            run.append(follows[run[-1]])
        if len(run) >= RUN:
            chained |= set(run)
            yield run
    alike: dict = {}
    for name in members:
        if name in inside and name not in chained:
            signature = (nodes[name][0], frozenset(sources[name]), frozenset(targets[name]))
            alike.setdefault(signature, []).append(name)
    for run in alike.values():
        if len(run) >= RUN:
            yield run


def _view(path: _Path, root: str, budget: int, limit: int) -> View | None:
    """The picture of ``root``'s inside (None: more than ``limit`` boxes even folded)."""
    opened = _opened(path, root, budget, limit)
    if opened is None:
        return None
    groups, view, box_of = path.groups, View(root), {}
    below = groups[root].depth + 1  # a node's chain holds the group of each depth at that index
    for name in path.under[root]:
        closed = next((key for key in path.chain[name][below:] if key not in opened), None)
        op, mark, tooltip = path.nodes[name]
        if closed is None or mark in PINNED:
            box_of[name] = name
            view.nodes[name] = (op, _shown(name, root), mark, tooltip)
            continue
        group = groups[closed]
        box_of[name] = group.box
        if group.box not in view.nodes:
            view.nodes[group.box] = _folded_box(group)
            view.folded[group.box] = group.size
    for name, box in box_of.items():
        view.edges |= {(box, box_of[target]) for target in path.targets.get(name, ())
                       if target in box_of and box_of[target] != box}
    for box in view.nodes:
        call = _frame_of(box, path.bodies)
        if call is not None:
            view.bodies.setdefault(call, (path.bodies[call][0], []))[1].append(box)
    return view


def _shown(name: str, root: str = "") -> str:
    """A node's name in its box: inside a function's body, its name there; in the
    picture of a scope's inside, its name in the scope."""
    if "|" in name:
        return name.rsplit("|", 1)[-1].split("/", 1)[-1]
    return name[len(root) + 1:] if root and name.startswith(root + "/") else name


def _folded_box(group: _Group) -> tuple:
    """The box of a folded group: its count, its own name (a scope's last part; the
    whole in the tooltip) and a tooltip."""
    marked = group.size - group.unpinned
    apart = f"; {marked} marked drawn apart" if marked else ""
    if group.run_op:
        first, last = group.members[0], group.members[-1]
        return (f"{group.size} x {group.run_op}", _shown(first) + " ...", "run",
                f"{group.size} x {group.run_op}: {first} ... {last}")
    return (f"{group.unpinned} nodes", group.key.rsplit("/", 1)[-1] + "/", "scope",
            f"{group.key}: {group.size} nodes{apart}")


def _frame_of(box: str, bodies: dict) -> str | None:
    """The call whose function's body frame holds ``box`` (the innermost), if any."""
    name = _group_key(box)  # a folded scope: where the scope is
    while "|" in name:
        call, function = name[:name.rfind("|")], name[name.rfind("|") + 1:].split("/")[0]
        if name != f"{call}|{function}" and call in bodies:
            return call
        name = call
    return None


def _opened(path: _Path, root: str, budget: int, limit: int) -> set | None:
    """The groups the picture of ``root``'s inside opens (None: even folded, more
    than ``limit`` boxes). Level by level; at each, the groups that grow the picture
    alike (a model's identical blocks) open together or not at all, the cheapest
    first, while the picture stays within ``budget``."""
    groups = path.groups
    count = groups[root].size - groups[root].unpinned + _inner(groups[root], groups)  # marked nodes: a box each
    if count > limit:
        return None
    opened, skipped = {root}, []

    def open_levels(level: list) -> None:
        nonlocal count
        while level:
            alike: dict = {}
            for key in level:
                alike.setdefault(_inner(groups[key], groups) - 1 if groups[key].unpinned else 0, []).append(key)
            level = []
            for grows, keys in sorted(alike.items()):
                if grows > 0 and count + grows * len(keys) > budget:
                    skipped.extend(keys)
                    continue
                opened.update(keys)
                count += grows * len(keys)
                level += [child for key in keys for child in groups[key].children]

    open_levels(list(groups[root].children))
    while count < min(MIN_BOXES, budget) and skipped:  # too few to say anything: open the group that grows least
        key = min(skipped, key=lambda name: _inner(groups[name], groups))
        skipped.remove(key)
        grows = _inner(groups[key], groups) - 1
        if count + grows > limit:
            break
        opened.add(key)
        count += grows
        open_levels(list(groups[key].children))
    return opened


def _inner(group: _Group, groups: dict) -> int:
    """The boxes ``group`` shows when opened, its marked nodes apart."""
    return sum(1 for child in group.children if groups[child].unpinned) + group.loose
