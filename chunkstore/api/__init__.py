"""The convenience functions of zarr-python 3, by job: creating arrays (``creation``),
opening nodes by mode (``opening``), saving and loading (``persistence``), copying
(``copying``) and consolidating metadata (``consolidation``); ``chunkstore`` exports
them."""
