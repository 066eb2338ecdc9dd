"""Problem families on the bipartite job-type/server graph: P1 (MultiServerChannel) and P2."""
