"""P3: RingAllReduce-v0 (GADGET paper, gadget.md §IV–VI): fat-tree substrate, ring placement, MILP."""
