"""The chunk grid: chunks per axis, the region a chunk covers, every chunk's coordinates."""
