"""Loaders for public cluster-trace formats (SPEC §9). They never download; users pass paths."""
