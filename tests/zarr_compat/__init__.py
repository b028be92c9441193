"""Behaviour tests ported from zarr-python 3.1's own test suite (test_group.py,
test_api.py, test_attributes.py, test_array.py): what those tests assert, rewritten
against chunkstore's public API. Where chunkstore deliberately differs, the test says so
and asserts chunkstore's behaviour."""
