"""Drawing a hierarchy as a tree of box characters (plain text, and HTML in notebooks),
as zarr-python 3's ``Group.tree`` does."""

from __future__ import annotations

import html

from chunkstore.metadata.nodes import NodeMetadata, is_array
from chunkstore.nodes.info import dtype_name


class TreeView:
    """The hierarchy below a group. ``str()`` draws it as zarr-python and the seeds do::

        /
        ├── a (4,) int32
        └── sub
            └── b (3, 3) float32

    ``truncated_at``: the node limit that cut the listing (a note is printed first).
    """

    def __init__(self, root_label: str, nodes: dict[str, NodeMetadata],
                 truncated_at: int | None = None) -> None:
        self.root_label, self.nodes, self.truncated_at = root_label, nodes, truncated_at

    def _label(self, rel: str) -> str:
        node = self.nodes[rel]
        name = rel.rsplit("/", 1)[-1]
        if is_array(node):
            return f"{name} {tuple(node.shape)} {dtype_name(node.dtype)}"  # type: ignore[union-attr]
        return name

    def lines(self) -> list[str]:
        """The drawing, one line per node, the root first."""
        children: dict[str, list[str]] = {}
        for rel in sorted(self.nodes):
            parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
            children.setdefault(parent, []).append(rel)
        out = [self.root_label]
        stack = [("", list(reversed(children.get("", []))))]
        while stack:  # iterative: deep hierarchies do not hit the recursion limit
            indent, todo = stack[-1]
            if not todo:
                stack.pop()
                continue
            rel = todo.pop()
            last = not todo
            out.append(f"{indent}{'└── ' if last else '├── '}{self._label(rel)}")
            if children.get(rel):
                stack.append((indent + ("    " if last else "│   "),
                              list(reversed(children[rel]))))
        return out

    def __str__(self) -> str:
        text = "\n".join(self.lines())
        if self.truncated_at is not None:
            text = (f"Truncated at max_nodes={self.truncated_at}, some nodes and their "
                    f"children may be missing\n{text}")
        return text

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"
