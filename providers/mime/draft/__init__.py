"""Saved drafts read back strictly into the composition fields they were built from."""
