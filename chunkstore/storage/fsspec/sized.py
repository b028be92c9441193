"""Reads of FsspecStore that learn the stored object's size, for bounded reads.

* S3 (s3fs): a ranged ``GetObject`` answers ``Content-Range: bytes a-b/<total>``, so
  the object's size comes with the bytes, in the same request (:func:`s3_get_sized`):
  an uncompressed chunk read by ranges is checked against its exact size for free,
  where a ``HEAD`` per chunk would add a round trip to every one. The ETag comes with
  it too, and a range pinned to one is sent with ``If-Match`` (:func:`s3_get_pinned`). A versioned read
  for a read-modify-write (:func:`s3_get_versioned_bounded`) asks for at most
  ``max_bytes + 1`` bytes and reads the total from the headers before the body: an
  object larger than any encoding of its chunk is refused without downloading it.
* other filesystems: ranged reads are fsspec's ``cat_ranges``, and the sizes of the
  objects read come from ``info`` (:func:`object_sizes`: one dict lookup on
  ``memory://``, concurrent requests on async filesystems).

Each function returns, per item, its result or the exception raised for it (as
``cat_ranges(on_error="return")`` does), run concurrently on s3fs's event loop.
FsspecStore uses them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from chunkstore.storage.base import ABSENT, ANY, CHANGED
from chunkstore.storage.s3_conditional import ETag, is_conflict

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def is_s3(fs: Any) -> bool:
    """Whether ``fs`` is an s3fs filesystem (its raw requests are used here)."""
    return hasattr(fs, "_call_s3") and hasattr(fs, "split_path")


def _range_header(start: int | None, stop: int | None) -> str | None:
    """The HTTP Range of ``[start, stop)`` (a negative start: the last bytes)."""
    if start is None and stop is None:
        return None
    start = 0 if start is None else start
    if start < 0:
        return f"bytes={start}"  # a suffix: "bytes=-N"
    return f"bytes={start}-" + ("" if stop is None else str(stop - 1))


def total_size(response: dict[str, Any], received: int) -> int:
    """The whole object's size from a GetObject response: Content-Range's total, else
    (a server that ignored the Range and sent everything) Content-Length or the bytes
    received."""
    match = _CONTENT_RANGE.match(str(response.get("ContentRange") or ""))
    if match and match.group(3) != "*":
        return int(match.group(3))
    length = response.get("ContentLength")
    return int(length) if length is not None else received


async def _call(fs: Any, func: Any) -> Any:
    """``func()`` with s3fs's retries of a whole request and its body (as ``_cat_file``)."""
    try:
        from s3fs.core import _error_wrapper
    except ImportError:  # another s3fs layout: no retries of the body read
        return await func()
    return await _error_wrapper(func, retries=fs.retries)


def s3_get_sized(fs: Any, items: Sequence[tuple[str, int | None, int | None]]) -> list[Any]:
    """``(bytes, object size)`` of each ``(path, start, stop)`` range, one ``GetObject``
    each (a server that ignores the Range: sliced here)."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    async def one(path: str, start: int | None, stop: int | None) -> tuple[bytes, int]:
        bucket, key, _ = fs.split_path(path)
        header = _range_header(start, stop)
        extra = {} if header is None else {"Range": header}

        async def read() -> tuple[bytes, int]:
            response = await fs._call_s3("get_object", Bucket=bucket, Key=key, **extra)
            body = response["Body"]
            try:
                data = await body.read()
            finally:
                body.close()
            size = total_size(response, len(data))
            if header is not None and not response.get("ContentRange") and len(data) == size:
                data = data[slice(start, stop)]  # the whole object came back
            return data, size

        return await _call(fs, read)

    return sync(fs.loop, _run_coros_in_chunks, [one(*item) for item in items],
                batch_size=fs.batch_size, return_exceptions=True)


def s3_cat_ranges_sized(fs: Any, paths: Sequence[str], starts: Sequence[int | None],
                        ends: Sequence[int | None]) -> tuple[list[Any], list[int | None]]:
    """The ranges as ``cat_ranges(paths, starts, ends, on_error="return")`` returns them,
    and the size of each object read (None where the read failed), from
    :func:`s3_get_sized`."""
    out = s3_get_sized(fs, list(zip(paths, starts, ends, strict=True)))
    return ([v[0] if isinstance(v, tuple) else v for v in out],
            [v[1] if isinstance(v, tuple) else None for v in out])


def s3_get_pinned(fs: Any, items: Sequence[tuple[str, int | None, int | None, Any]],
                  conditions: bool = True) -> list[Any]:
    """``(bytes, generation)`` of each ``(path, start, stop, pinned)`` range (one
    ``GetObject`` each: the generation is the answer's ``ETag``, ``ABSENT`` when
    missing), or the exception raised for it. Pinned to an ETag (not ``ANY``), the GET is
    sent with ``If-Match`` (with ``conditions``), and ``(None, CHANGED)`` stands for a
    412, a missing object or an answer of another ETag."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    async def one(path: str, start: int | None, stop: int | None, pinned: Any
                  ) -> tuple[bytes | None, Any]:
        bucket, key, _ = fs.split_path(path)
        extra = {"IfMatch": pinned.value} if conditions and pinned is not ANY else {}

        def tagged(data: bytes | None, response: dict[str, Any] | None
                   ) -> tuple[bytes | None, Any]:
            etag = None if response is None else response.get("ETag")
            generation = ABSENT if response is None else (ETag(etag) if etag else ANY)
            if pinned is not ANY and generation != pinned:
                return None, CHANGED
            return data, generation

        async def head() -> tuple[dict[str, Any] | None, int]:
            try:
                response = await fs._call_s3("head_object", Bucket=bucket, Key=key, **extra)
            except FileNotFoundError:
                return None, 0
            return response, int(response.get("ContentLength") or 0)

        async def read() -> tuple[bytes | None, Any]:
            if start is not None and stop is not None and (stop <= start or start < 0):
                response, _ = await head()  # nothing to read; only existence matters
                return tagged(None if response is None else b"", response)
            header = _range_header(start, stop)
            ranged = {} if header is None else {"Range": header}
            try:
                response = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                                             **ranged, **extra)
            except FileNotFoundError:
                return tagged(None, None)
            except OSError as e:
                if not is_invalid_range(e):
                    raise
                # a range starting past the end (416): empty, if the object exists
                response, size = await head()
                if response is None or start is None or start < 0 or start < size:
                    raise
                return tagged(b"", response)
            body = response["Body"]
            try:
                data = await body.read()
            finally:
                body.close()
            if header is not None and not response.get("ContentRange") and (
                    len(data) == total_size(response, len(data))):
                data = data[slice(start, stop)]  # the whole object came back
            return tagged(data, response)

        try:
            return await _call(fs, read)
        except OSError as e:
            if pinned is not ANY and is_conflict(e):
                return None, CHANGED
            raise

    return sync(fs.loop, _run_coros_in_chunks, [one(*item) for item in items],
                batch_size=fs.batch_size, return_exceptions=True)


def s3_get_versioned_bounded(fs: Any, paths: Sequence[str], max_bytes: int) -> list[Any]:
    """``(body, ETag)`` per path (``(None, ABSENT)`` when missing), or ``(None, size)``
    for an object larger than ``max_bytes`` (its body left unread), or the exception
    raised for it. Each is one GetObject of at most ``max_bytes + 1`` bytes."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    async def one(path: str) -> tuple[bytes | None, Any]:
        bucket, key, _ = fs.split_path(path)

        async def read() -> tuple[bytes | None, Any]:
            try:
                response = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                                             Range=f"bytes=0-{max_bytes}")
            except FileNotFoundError:
                return None, ABSENT
            body = response["Body"]
            try:
                size = total_size(response, int(response.get("ContentLength") or 0))
                if size > max_bytes:
                    return None, size
                data = await body.read()
            finally:
                body.close()
            etag = response.get("ETag")
            return data, (ETag(etag) if etag else ANY)

        return await _call(fs, read)

    return sync(fs.loop, _run_coros_in_chunks, [one(p) for p in paths],
                batch_size=fs.batch_size, return_exceptions=True)


def object_sizes(fs: Any, paths: Sequence[str]) -> list[Any]:
    """The size of each path (None when missing or a directory), or the exception
    raised for it; concurrent on async filesystems."""
    async def one_async(path: str) -> int | None:
        try:
            info = await fs._info(path)
        except FileNotFoundError:
            return None
        return None if info.get("type") == "directory" else int(info["size"])

    for path in paths:  # a listing cached earlier may show an older size
        fs.invalidate_cache(path)
    if getattr(fs, "async_impl", False) and hasattr(fs, "_info"):
        from fsspec.asyn import _run_coros_in_chunks, sync
        return sync(fs.loop, _run_coros_in_chunks, [one_async(p) for p in paths],
                    batch_size=fs.batch_size, return_exceptions=True)
    out: list[Any] = []
    for path in paths:
        try:
            info = fs.info(path)
            out.append(None if info.get("type") == "directory" else int(info["size"]))
        except FileNotFoundError:
            out.append(None)
        except Exception as e:  # returned, as for the async filesystems
            out.append(e)
    return out


def object_size(fs: Any, path: str) -> int | None:
    """The size of ``path`` (None when missing or a directory): one HEAD on S3 (``info``
    would LIST the prefix after a 404, looking for a directory), ``info`` elsewhere."""
    if hasattr(fs, "call_s3") and hasattr(fs, "split_path"):
        bucket, object_key, _ = fs.split_path(path)
        try:
            return int(fs.call_s3("head_object", Bucket=bucket, Key=object_key)
                       ["ContentLength"])
        except FileNotFoundError:
            return None
    size = object_sizes(fs, [path])[0]
    if isinstance(size, BaseException):
        raise size
    return size


def is_invalid_range(error: BaseException) -> bool:
    """Whether ``error`` (as s3fs raises it, botocore's error as its cause) is S3's 416
    InvalidRange: no range fits an empty object."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            if (response.get("Error", {}).get("Code") == "InvalidRange"
                    or response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 416):
                return True
        text = str(seen)
        if "InvalidRange" in text or "not satisfiable" in text or " 416" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
