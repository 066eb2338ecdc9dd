"""P4: ApproxJobs (OPM paper, opm.md §III–VI)."""

from clustergym.core.family import EnvEntry, FamilySpec
from clustergym.envs.approxjobs.types import ApproxFeedback, ApproxObservation

__all__ = ["FAMILY", "ApproxObservation", "ApproxFeedback"]

_PKG = "clustergym.envs.approxjobs"

FAMILY = FamilySpec(
    name="approxjobs",
    number="P4",
    paper="OPM",
    envs=(EnvEntry(id="clustergym/ApproxJobs-v0",
                   entry_point=f"{_PKG}.env:ApproxJobsEnv",
                   vector_entry_point=f"{_PKG}.vector:ApproxJobsVectorEnv",
                   parallel_entry_point=f"{_PKG}.parallel:parallel_env",  # machines as agents
                   check_kwargs={"num_machines": 10, "max_jobs": 5, "arrival_rate": 0.1}),
          ),
    action_kwargs=("action_mode",),  # "job": per-job levels dealt to machines by the env (env.py): same dynamics
    scenario=f"{_PKG}.scenario:make_approx_scenario",
    drl_hooks=f"{_PKG}.drl_hooks",
    entity=f"{_PKG}.entity",  # the per-entity network (clustergym train --net entity)
    experiment="opm",
    paper_file="opm.md",
    paper_agent="opm",
)
