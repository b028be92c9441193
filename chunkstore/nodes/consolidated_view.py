"""``Group.metadata.consolidated_metadata`` of a v3 group as zarr-python shows it: an
object with ``metadata`` (the direct members' metadata objects, a member group carrying
its own members in its ``consolidated_metadata``), ``flattened_metadata`` (every
descendant by relative path), ``kind`` and ``must_understand``.

It is also the JSON object stored in ``zarr.json`` (a ``dict``: ``cm["metadata"]`` is the
raw documents, ``json.dumps(cm)`` writes it back), as chunkstore showed it before.
"""

from __future__ import annotations

from typing import Any

from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.nodes import NodeMetadata
from chunkstore.metadata.v3 import GroupMetadataV3


class ConsolidatedMetadata(dict):
    """The ``consolidated_metadata`` field of a v3 group (a dict of its JSON), with
    zarr-python's attributes.

    >>> cm = ConsolidatedMetadata({"kind": "inline", "must_understand": False, "metadata": {
    ...     "g": {"zarr_format": 3, "node_type": "group", "attributes": {}},
    ...     "g/x": {"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}}}})
    >>> sorted(cm.metadata), cm.metadata["g"].consolidated_metadata.metadata["x"].attributes
    (['g'], {'a': 1})
    >>> sorted(cm.flattened_metadata), cm.kind, cm["kind"]
    (['g', 'g/x'], 'inline', 'inline')
    """

    @property
    def kind(self) -> str:
        """How the members are stored: "inline" (the only kind the spec defines)."""
        return self.get("kind", "inline")

    @property
    def must_understand(self) -> bool:
        """False: a reader may ignore the field."""
        return bool(self.get("must_understand", False))

    @property
    def flattened_metadata(self) -> dict[str, NodeMetadata]:
        """Every descendant's metadata by path relative to the group (``"a/b"``)."""
        return cons.parse_v3_inline(self, "consolidated_metadata")

    @property
    def metadata(self) -> dict[str, NodeMetadata]:
        """The direct members' metadata by name; a member group's ``consolidated_metadata``
        holds its own members (zarr-python's nested form)."""
        flat = self.flattened_metadata
        raw = self.get("metadata") or {}
        out: dict[str, NodeMetadata] = {}
        for rel, node in flat.items():
            if "/" in rel:
                continue
            if isinstance(node, GroupMetadataV3):
                prefix = rel + "/"
                below = {k.strip("/")[len(prefix):]: v for k, v in raw.items()
                         if k.strip("/").startswith(prefix)}
                node = node.replace(consolidated_metadata=ConsolidatedMetadata(
                    {"kind": "inline", "must_understand": False, "metadata": below}))
            out[rel] = node
        return out

    def to_dict(self) -> dict[str, Any]:
        """The field as a plain JSON object."""
        return dict(self)


def consolidated_field(meta: GroupMetadataV3,
                       snapshot_entries: dict[str, NodeMetadata] | None) -> Any:
    """What a v3 group's ``metadata.consolidated_metadata`` shows: its stored field, or
    for a group reached through a consolidated parent, its part of the snapshot; None
    when neither exists."""
    field: Any = meta.consolidated_metadata
    if field is None and snapshot_entries is not None:
        field = cons.v3_inline(snapshot_entries)
    if field is None or isinstance(field, ConsolidatedMetadata):
        return field
    return ConsolidatedMetadata(field)
