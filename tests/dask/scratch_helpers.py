"""What the tests of rechunk intermediates on local disk look at: the keys of an S3
bucket, and the files below a directory."""

from __future__ import annotations

from pathlib import Path


def s3_keys(url: str, options: dict) -> set[str]:
    """Every key of the bucket of ``url`` (``s3://bucket``), read through a new s3fs
    client (no listing cache)."""
    import s3fs
    fs = s3fs.S3FileSystem(**{k: v for k, v in options.items() if k != "backend"})
    fs.invalidate_cache()
    bucket = url.removeprefix("s3://")
    return {p.removeprefix(bucket + "/") for p in fs.find(bucket)}


def files_below(base: str | Path) -> set[str]:
    """The files below ``base``, relative to it (none when it does not exist)."""
    base = Path(base)
    return {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()} \
        if base.exists() else set()
