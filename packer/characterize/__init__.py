"""characterize."""
