"""The caches of the IO layer: a bounded LRU (``lru``), the decoded-chunk cache
(``chunk_cache``, ``inner_cache`` for shards) with where a chunk lives (``place``) and when
a local file's stat may stand for its content (``stamps``)."""
