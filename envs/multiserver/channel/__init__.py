"""P1 MultiServerChannel (ESDP paper)."""
