"""The learned-scheduler benchmark (``clustergym drl``) under the name it had here: it is an experiment, and lives
in :mod:`clustergym.experiments.drl` (plan: :mod:`~clustergym.experiments.drl_plan`, tables and figures:
:mod:`~clustergym.experiments.drl_report`, shipping the best model: :mod:`~clustergym.experiments.drl_export`)."""

from clustergym.experiments.drl import CELL_BYTES, CELL_FILE_BYTES, plan_cells, plan_for, run_benchmark
from clustergym.experiments.drl_cells import OLD, STAGE, CellError, cell_config, cell_state, check_cell_files
from clustergym.experiments.drl_export import _prepare_export, check_export, export_pretrained  # noqa: F401
from clustergym.experiments.drl_plan import FULL_OUT, HORIZON, PLAN, QUICK, TRAIN_SEED_OFFSET, EnvPlan, Learner

__all__ = ["Learner", "EnvPlan", "PLAN", "HORIZON", "QUICK", "FULL_OUT", "TRAIN_SEED_OFFSET", "run_benchmark", "plan_for",
           "plan_cells", "cell_config", "cell_state", "check_cell_files", "CellError", "check_export", "export_pretrained",
           "CELL_BYTES", "CELL_FILE_BYTES", "OLD", "STAGE"]
