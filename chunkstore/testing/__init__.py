"""What tests of chunkstore and of stores built on it share: the store contract suite."""
