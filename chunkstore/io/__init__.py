"""Chunk IO: the layout of an array in a store (read and write units, keys), the engines
that read and write selections through batched store calls, byte-range coalescing, and
the one read-modify-write primitive with a conditional commit."""
