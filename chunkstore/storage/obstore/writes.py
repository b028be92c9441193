"""Request building for ObstoreStore's writes: values as buffers obstore takes without a
copy, a generation as obstore's ``put`` mode, and the conditional DELETE that
object_store lacks (a presigned URL sent with ``If-Match``)."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

from chunkstore.storage.base import ABSENT, ANY, BytesLike
from chunkstore.storage.obstore.setup import obstore_module
from chunkstore.storage.s3_conditional import ETag


def as_buffer(value: BytesLike) -> Any:
    """A value obstore takes without a copy: bytes as they are, other buffers as a flat
    byte view."""
    if isinstance(value, bytes):
        return value
    view = memoryview(value)
    if view.c_contiguous and view.ndim == 1 and view.format in ("B", "b", "c"):
        return view
    return bytes(view)


def put_mode(generation: Any) -> Any:
    """obstore's ``put`` mode for a commit expecting ``generation``: "overwrite" (ANY),
    "create" (ABSENT), an ETag match; None for a generation no object can have."""
    if generation is ANY:
        return "overwrite"
    if generation is ABSENT:
        return "create"
    if isinstance(generation, ETag):
        return {"e_tag": generation.value}
    return None


def delete_if_match(client: Any, path: str, generation: ETag) -> bool:
    """DELETE ``path`` with ``If-Match`` through a presigned URL (object_store has no
    conditional delete): True when applied, False when the object changed or is gone
    (412, 409, 404)."""
    url = obstore_module().sign(client, "DELETE", path, timedelta(minutes=5))
    request = urllib.request.Request(url, method="DELETE",
                                     headers={"If-Match": generation.value})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
    except urllib.error.HTTPError as e:
        if e.code in (404, 409, 412):
            return False
        raise
    return True
