"""Versioned reads and conditional writes on S3 (s3fs), run concurrently on s3fs's loop.

A generation is the object's ETag, as returned by the GET that read its body. A commit
is one ``PutObject`` with ``If-Match: <etag>`` (``If-None-Match: *`` to create only if
missing), or one ``DeleteObject`` with ``If-Match``: S3 applies each atomically, and
answers 412 PreconditionFailed (or 409 ConditionalRequestConflict when a concurrent
conditional write won) when the object changed, which means "not applied". An
``If-Match`` on an object deleted meanwhile is answered 404: not applied either.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from .base import ABSENT, ANY

#: S3 error codes and HTTP statuses that mean "the condition did not hold"
_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_CONFLICT_STATUS = {409, 412}


class ETag:
    """The generation of an S3 object: its ETag (quotes included, as S3 sends it)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"ETag({self.value})"


@functools.cache
def conditional_requests_supported() -> bool:
    """Whether the installed botocore knows ``IfMatch``/``IfNoneMatch`` on PutObject and
    ``IfMatch`` on DeleteObject (botocore >= 1.36 or so); looked up once per process."""
    try:
        import botocore.session
        model = botocore.session.get_session().get_service_model("s3")
        put = model.operation_model("PutObject").input_shape.members
        delete = model.operation_model("DeleteObject").input_shape.members
    except Exception:  # no botocore, or no model: plain writes only
        return False
    return "IfMatch" in put and "IfNoneMatch" in put and "IfMatch" in delete


def is_conflict(error: BaseException) -> bool:
    """Whether ``error`` (as s3fs raises it, the botocore error as its cause) is S3
    refusing a condition: 412 or 409."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _CONFLICT_CODES or status in _CONFLICT_STATUS:
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def get_versioned(fs: Any, paths: Sequence[str]) -> list[Any]:
    """``(body, ETag)`` per path (``(None, ABSENT)`` when missing), or the exception
    raised for it, fetched concurrently."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    async def one(path: str) -> tuple[bytes | None, Any]:
        bucket, key, _ = fs.split_path(path)
        try:
            response = await fs._call_s3("get_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None, ABSENT
        body = response["Body"]
        try:
            data = await body.read()
        finally:
            body.close()
        return data, ETag(response["ETag"])

    return sync(fs.loop, _run_coros_in_chunks, [one(p) for p in paths],
                batch_size=fs.batch_size, return_exceptions=True)


def commit(fs: Any, items: Sequence[tuple[str, bytes | None, Any]]) -> list[Any]:
    """Apply ``(path, body or None, generation)`` items concurrently; per item True
    (applied), False (the condition did not hold) or the exception raised."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    async def one(path: str, body: bytes | None, generation: Any) -> bool:
        bucket, key, _ = fs.split_path(path)
        condition: dict[str, str] = {}
        if generation is ABSENT:
            if body is None:  # delete "only if missing": true iff it is missing
                try:
                    await fs._call_s3("head_object", Bucket=bucket, Key=key)
                except FileNotFoundError:
                    return True
                return False
            condition["IfNoneMatch"] = "*"
        elif generation is not ANY:
            if not isinstance(generation, ETag):
                return False
            condition["IfMatch"] = generation.value
        try:
            if body is None:
                await fs._call_s3("delete_object", Bucket=bucket, Key=key, **condition)
            else:
                await fs._call_s3("put_object", Bucket=bucket, Key=key, Body=body,
                                  **condition)
        except FileNotFoundError:
            if not condition:
                return True  # an unconditional delete of a missing object
            return False  # If-Match on an object that is gone
        except (FileExistsError, OSError) as e:
            if condition and (isinstance(e, FileExistsError) or is_conflict(e)):
                return False
            raise
        return True

    return sync(fs.loop, _run_coros_in_chunks, [one(*item) for item in items],
                batch_size=fs.batch_size, return_exceptions=True)
