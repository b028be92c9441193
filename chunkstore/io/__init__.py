"""Chunk IO: the layout of an array in a store (read and write units, keys), the engine
that reads and writes selections through batched store calls (its unit IOs: chunks
stored whole, shards read in parts), byte-range coalescing, and
the one read-modify-write primitive with a conditional commit."""
