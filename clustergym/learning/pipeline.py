"""The observation pipeline of the learning stack: :mod:`clustergym.pipeline`, under the name it had here.

The pipeline (flatten + empirical statistics, masks, Box bounds) has no torch or SB3 and the public wrappers
(:mod:`clustergym.wrappers`) are built on it, so it lives in the core; import it from there.
"""

from clustergym.pipeline import (DRLObservation, EmpiricalStats, LAYOUTS, ObsPipeline, box_bounds, flat_size,
                                 flatten_batch, flatten_keys, hook, layout_columns, layout_keys, plain_keys, sb3_mask,
                                 unscale_action)

__all__ = ["EmpiricalStats", "ObsPipeline", "DRLObservation", "LAYOUTS", "layout_keys", "layout_columns", "flatten_keys",
           "flat_size", "flatten_batch", "sb3_mask", "unscale_action", "box_bounds", "hook", "plain_keys"]
