"""Loaders for public cluster-trace formats. They never download; users pass paths."""
