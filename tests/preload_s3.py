"""Imported by the suite's fork server (:data:`tests.multiproc.PRELOAD`), never by the test
process: s3fs imported, and botocore's S3 data parsed once into one shared loader, so that
a writer process forked from the server makes its s3fs client in ~0.05 s instead of
importing s3fs (~0.6 s) and parsing the service-model JSON (~0.28 s) itself. The clients,
their sessions and credentials stay the process's own."""

from __future__ import annotations

import functools


def _load() -> None:
    try:
        import botocore.loaders
        import botocore.session
        import s3fs  # noqa: F401
    except ImportError:
        return
    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)
    # a client made and dropped (no request, no thread): its data stays in the loader
    botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", aws_access_key_id="preload",
        aws_secret_access_key="preload")


_load()
