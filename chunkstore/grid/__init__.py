"""The chunk grid: how an array's extent is cut into chunks (regular or rectilinear)."""
