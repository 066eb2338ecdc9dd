"""P4: ApproxJobs (OPM paper, opm.md §III–VI)."""
