"""Drawing a hierarchy as a tree of box characters (plain text, and HTML in notebooks)."""

from __future__ import annotations

import html

from .metadata import NodeMetadata, is_array


class TreeView:
    """The hierarchy below a group. ``str()`` draws it as the seeds show::

        /
        ├── a (4,) int32
        └── sub
            └── b (3, 3) float32
    """

    def __init__(self, root_label: str, nodes: dict[str, NodeMetadata]) -> None:
        self.root_label, self.nodes = root_label, nodes

    def _label(self, rel: str) -> str:
        node = self.nodes[rel]
        name = rel.rsplit("/", 1)[-1]
        if is_array(node):
            return f"{name} {tuple(node.shape)} {node.dtype}"  # type: ignore[union-attr]
        return name

    def lines(self) -> list[str]:
        children: dict[str, list[str]] = {}
        for rel in sorted(self.nodes):
            parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
            children.setdefault(parent, []).append(rel)
        out = [self.root_label]

        def draw(parent: str, indent: str) -> None:
            kids = children.get(parent, [])
            for i, rel in enumerate(kids):
                last = i == len(kids) - 1
                out.append(f"{indent}{'└── ' if last else '├── '}{self._label(rel)}")
                draw(rel, indent + ("    " if last else "│   "))

        draw("", "")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"
