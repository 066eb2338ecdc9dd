"""P2 MultiServerAllocation (OGASched paper)."""
