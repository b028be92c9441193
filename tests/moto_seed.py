"""Objects put straight into the moto S3 server of this process (tests/conftest.py's
``s3_endpoint`` serves moto's in-process backends): for a test that needs many objects to
be there (a listing past S3's 1000-key page) but whose proof is in the requests that
read, list or delete them, not in the PUTs that made them. One object costs microseconds
instead of a request (~7 ms of the server's CPU)."""

from __future__ import annotations

from collections.abc import Mapping


def put_objects(bucket: str, objects: Mapping[str, bytes]) -> None:
    """Store ``objects`` (key -> bytes) in ``bucket`` as PUT requests would."""
    from moto.s3.models import s3_backends

    partition, account = s3_backends.bucket_accounts[bucket]
    backend = s3_backends[account][partition]
    for key, value in objects.items():
        backend.put_object(bucket, key, bytes(value))
