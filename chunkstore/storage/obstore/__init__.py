"""ObstoreStore: S3 through obstore (Rust object_store bindings)."""
