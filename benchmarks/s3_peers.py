"""The libraries of ``bench_s3``: each one's way of writing, opening and reading an
array and a group on S3 (chunkstore with its default backend, chunkstore with fsspec
named, zarr-python, zarr-python with zarrs, tensorstore)."""

from __future__ import annotations

from typing import Any


class Peer:
    """One library's way of doing each case (subclasses below)."""

    name = ""
    #: the S3 client underneath, shown with each row
    backend = ""

    def __init__(self, endpoint: str, bucket: str, options: dict, group_size: int = 31) -> None:
        self.endpoint, self.bucket, self.options = endpoint, bucket, options
        self.group_size = group_size
        self.key = f"{self.name}.zarr"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def group_url(self, kind: str) -> str:
        """The group of ``make_groups`` (``kind``: "plain" or "consolidated"), one per
        method: the methods of a round run side by side."""
        return f"s3://{self.bucket}/{self.name}-group-{kind}.zarr"

    def warm(self, data, chunks) -> None:
        """Write and read a small array first, so sessions and connections exist."""
        key, self.key = self.key, f"{self.name}-warm.zarr"
        try:
            self.create_and_write(data[tuple(slice(0, c) for c in chunks)], chunks)
            self.read_all(self.open())
        finally:
            self.key = key

    def create_and_write(self, data, chunks) -> None: ...
    def open(self) -> Any: ...
    def read_all(self, a) -> Any: return a[...]
    def read_chunk(self, a, chunks) -> Any: return a[tuple(slice(0, c) for c in chunks)]
    def read_element(self, a) -> Any: return a[1, 1]
    def make_groups(self) -> None: ...
    def open_group(self, consolidated: bool) -> int: ...

    #: whether it has a hierarchy API (the group cases)
    groups = True

    #: runs a coroutine on the event loop of the library's asynchronous s3fs filesystems,
    #: so that ``s3_endpoint.close_s3fs`` can close their sessions (None: it has none)
    run_async: Any = None


class Chunkstore(Peer):
    """chunkstore as users get it: no backend named, so obstore when it is installed (and
    the options translate), else fsspec; ``backend`` says which one served the row."""

    name = "chunkstore"

    @property
    def backend(self) -> str:  # type: ignore[override]
        from chunkstore.storage.resolve import resolve_store
        return resolve_store(self.url, mode="r", storage_options=self.options).backend

    def create_and_write(self, data, chunks) -> None:
        import numcodecs

        import chunkstore as cs
        a = cs.create_array(self.url, shape=data.shape, dtype=data.dtype, chunks=chunks,
                            compressors=numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE),
                            storage_options=self.options)
        a[...] = data

    def open(self):
        import chunkstore as cs
        return cs.open_array(self.url, mode="r", storage_options=self.options)

    def make_groups(self) -> None:
        import chunkstore as cs
        for kind in ("plain", "consolidated"):
            g = cs.group(self.group_url(kind),
                         storage_options=self.options)
            for i in range(self.group_size):
                g.create_array(f"a{i}", shape=(100,), dtype="f4", chunks=(10,))
        cs.consolidate_metadata(self.group_url("consolidated"),
                                storage_options=self.options)

    def open_group(self, consolidated: bool) -> int:
        import chunkstore as cs
        kind = "consolidated" if consolidated else "plain"
        g = cs.open_group(self.group_url(kind), mode="r",
                          storage_options=self.options, use_consolidated=consolidated)
        return len(g.members())


class ChunkstoreFsspec(Chunkstore):
    """chunkstore with ``storage_options={"backend": "fsspec"}`` (s3fs + aiobotocore), the
    default of s3:// URLs before obstore was."""

    name = "chunkstore-fsspec"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.options = {**self.options, "backend": "fsspec"}


class ChunkstoreObstore(Chunkstore):
    """chunkstore with ``storage_options={"backend": "obstore"}`` (obstore's S3 client):
    the ``chunkstore`` row itself when obstore is installed, so not run by default."""

    name = "chunkstore-obstore"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        from chunkstore.storage.obstore import setup as obstore_setup
        if not obstore_setup.available():
            raise ImportError("obstore is not installed")
        self.options = {**self.options, "backend": "obstore"}


class ZarrPython(Peer):
    name = "zarr-python"
    backend = "fsspec"

    @staticmethod
    def run_async(coroutine: Any) -> Any:  # type: ignore[override]
        from zarr.core.sync import sync
        return sync(coroutine)

    def _store(self, url: str, read_only: bool = False):
        import zarr
        return zarr.storage.FsspecStore.from_url(url, storage_options=self.options,
                                                 read_only=read_only)

    def create_and_write(self, data, chunks) -> None:
        import zarr
        from zarr.codecs import BloscCodec
        z = zarr.create_array(self._store(self.url), shape=data.shape, dtype=data.dtype,
                              chunks=chunks, compressors=BloscCodec(cname="lz4", clevel=5,
                                                                    shuffle="shuffle"))
        z[...] = data

    def open(self):
        import zarr
        return zarr.open_array(self._store(self.url, True), mode="r")

    def make_groups(self) -> None:
        import zarr
        for kind in ("plain", "consolidated"):
            store = self._store(self.group_url(kind))
            g = zarr.open_group(store, mode="w")
            for i in range(self.group_size):
                g.create_array(f"a{i}", shape=(100,), dtype="f4", chunks=(10,))
            if kind == "consolidated":
                zarr.consolidate_metadata(store)

    def open_group(self, consolidated: bool) -> int:
        import zarr
        kind = "consolidated" if consolidated else "plain"
        store = self._store(self.group_url(kind), True)
        g = zarr.open_group(store, mode="r", use_consolidated=consolidated)
        return len(list(g.members()))


class Zarrs(ZarrPython):
    """zarr-python with the zarrs codec pipeline (Rust). zarrs reads and writes through
    its own store adapters; for a store it has none for (fsspec's S3 here), zarr-python
    silently builds its own pipeline instead, which would only measure zarr-python
    again: the peer is then skipped, saying so."""

    name = "zarrs"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import zarrs  # noqa: F401

    @staticmethod
    def _pipeline():
        import zarr
        return zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})

    def _check(self, z) -> Any:
        pipeline = type(z._async_array.codec_pipeline).__name__
        if pipeline != "ZarrsCodecPipeline":
            raise ImportError(f"zarrs has no adapter for this store ({type(z.store).__name__}"
                              f" on s3://): zarr-python used its own {pipeline}")
        return z

    def warm(self, data, chunks) -> None:
        super().warm(data, chunks)
        key, self.key = self.key, f"{self.name}-warm.zarr"
        try:
            self._check(self.open())
        finally:
            self.key = key

    def create_and_write(self, data, chunks) -> None:
        with self._pipeline():
            super().create_and_write(data, chunks)

    def open(self):
        with self._pipeline():
            return super().open()


class TensorStore(Peer):
    name = "tensorstore"
    backend = "tensorstore"
    groups = False  # tensorstore has no hierarchy API

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import tensorstore as ts
        self.context = ts.Context()

    def _spec(self) -> dict:
        return {"driver": "zarr3", "kvstore": {
            "driver": "s3", "bucket": self.bucket, "path": f"{self.key}/",
            "endpoint": self.endpoint, "aws_region": "us-east-1"}}

    def create_and_write(self, data, chunks) -> None:
        import tensorstore as ts
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
                  {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                      "shuffle": "shuffle", "typesize": 4}}]
        t = ts.open(self._spec(), create=True, dtype=ts.float32, shape=data.shape,
                    chunk_layout=ts.ChunkLayout(chunk_shape=chunks),
                    codec=ts.CodecSpec({"driver": "zarr3", "codecs": codecs}),
                    context=self.context).result()
        t.write(data).result()

    def open(self):
        import tensorstore as ts
        return ts.open(self._spec(), open=True, read=True, context=self.context).result()

    def read_all(self, a):
        return a.read().result()

    def read_chunk(self, a, chunks):
        return a[tuple(slice(0, c) for c in chunks)].read().result()

    def read_element(self, a):
        return a[1, 1].read().result()


class ObstoreAlone(Peer):
    """No library: the floor of chunkstore's default backend. obstore's client (as
    chunkstore configures it) and numcodecs' blosc, nothing else: each chunk encoded and
    PUT, GET and decoded into its place, a few requests in flight (``IN_FLIGHT``); open
    is one GET of ``zarr.json``. The same objects as chunkstore's array (its metadata
    document, chunk keys ``c/i/j``). A row's ratio to it is the share of chunkstore's time
    that the bare requests and decoding take."""

    name = "obstore-alone"
    backend = "obstore"
    groups = False
    IN_FLIGHT = 16

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        from chunkstore.storage.obstore import setup as obstore_setup
        if not obstore_setup.available():
            raise ImportError("obstore is not installed")
        from chunkstore.storage.obstore.store import ObstoreStore
        self._client = ObstoreStore(f"s3://{self.bucket}", self.options).client

    def _keys(self, shape, chunks) -> list[tuple[str, tuple[slice, ...]]]:
        """(key, region) of each chunk (the benchmark's arrays hold whole chunks)."""
        import itertools
        if any(n % c for n, c in zip(shape, chunks, strict=True)):
            raise ValueError(f"obstore-alone writes whole chunks only: {shape} in {chunks}")
        grid = [range(0, n, c) for n, c in zip(shape, chunks, strict=True)]
        return [("c/" + "/".join(str(o // c) for o, c in zip(at, chunks, strict=True)),
                 tuple(slice(o, o + c) for o, c in zip(at, chunks, strict=True)))
                for at in itertools.product(*grid)]

    def create_and_write(self, data, chunks) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import numcodecs
        import obstore

        import chunkstore as cs
        document = cs.create_array(cs.MemoryStore(), shape=data.shape, dtype=data.dtype,
                                   chunks=chunks).store.get("zarr.json")
        codec = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)  # as the others'

        def put(item):
            key, where = item
            obstore.put(self._client, f"{self.key}/{key}", codec.encode(data[where].copy()),
                        use_multipart=False)
        with ThreadPoolExecutor(self.IN_FLIGHT) as pool:
            list(pool.map(put, self._keys(data.shape, chunks)))
        obstore.put(self._client, f"{self.key}/zarr.json", document, use_multipart=False)

    def open(self):
        import json

        import numpy as np
        import obstore
        meta = json.loads(bytes(obstore.get(self._client, f"{self.key}/zarr.json").bytes()))
        return _Opened(tuple(meta["shape"]), np.dtype(meta["data_type"]),
                       tuple(meta["chunk_grid"]["configuration"]["chunk_shape"]))

    def _chunk(self, a, key: str):
        import numpy as np
        import obstore
        from numcodecs import blosc
        out = np.empty(a.chunks, a.dtype)
        blosc.decompress(obstore.get(self._client, f"{self.key}/{key}").bytes(), out)
        return out

    def read_all(self, a):
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np
        out = np.empty(a.shape, a.dtype)

        def one(item):
            key, where = item
            out[where] = self._chunk(a, key)
        with ThreadPoolExecutor(self.IN_FLIGHT) as pool:
            list(pool.map(one, self._keys(a.shape, a.chunks)))
        return out

    def read_chunk(self, a, chunks):
        return self._chunk(a, "c/" + "/".join("0" * len(chunks)))

    def read_element(self, a):
        return self._chunk(a, "c/" + "/".join("0" * len(a.chunks)))[1, 1]


class _Opened:
    """What ``ObstoreAlone.open`` read: the array's shape, dtype and chunk shape."""

    def __init__(self, shape: tuple, dtype: Any, chunks: tuple) -> None:
        self.shape, self.dtype, self.chunks = shape, dtype, chunks


PEERS: dict[str, type[Peer]] = {"chunkstore": Chunkstore,
                                 "chunkstore-fsspec": ChunkstoreFsspec,
                                 "chunkstore-obstore": ChunkstoreObstore,
                                 "zarr-python": ZarrPython, "zarrs": Zarrs,
                                 "tensorstore": TensorStore,
                                 "obstore-alone": ObstoreAlone}
