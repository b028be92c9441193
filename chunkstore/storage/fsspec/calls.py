"""How FsspecStore calls fsspec: which errors mean a missing key, which stay as they are
and which are a backend failure; which names fsspec's batched calls would expand as
globs; the extra arguments of ``cat``."""

from __future__ import annotations

import inspect
import re
from typing import Any

#: fsspec's batched calls expand these as globs: such names are read one by one
GLOB_MAGIC = re.compile(r"[*?\[]")
#: precise errors (s3fs's translation of AccessDenied, NoSuchKey...) that stay as they are
PASS_THROUGH = (PermissionError, FileNotFoundError, FileExistsError, IsADirectoryError,
                NotADirectoryError)


def is_missing(err: BaseException) -> bool:
    """Whether ``err`` (returned by a batched call for one path) means "no such key"."""
    return isinstance(err, FileNotFoundError | KeyError)


def backend_errors() -> tuple[type[BaseException], ...]:
    """What a backend raises when a request fails: OSError (s3fs translates most S3
    errors to it, aiohttp's connection errors are OSErrors) and botocore's own."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return (OSError,)
    return (OSError, BotoCoreError, ClientError)


def cat_kwargs(fs: Any) -> dict[str, Any]:
    """Extra arguments of ``cat``/``cat_ranges`` on ``fs``: s3fs would otherwise send a
    HEAD before each whole-object GET (to decide on a multi-part download), doubling
    requests."""
    cat_file = getattr(fs, "_cat_file", None) or fs.cat_file
    try:
        params = inspect.signature(cat_file).parameters
    except (TypeError, ValueError):
        return {}
    return {"max_concurrency": 1} if "max_concurrency" in params else {}
