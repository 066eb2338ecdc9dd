"""A tuning study's objective for models trained elsewhere (e.g. a ``clustergym drl`` row in its untuned setting).

The objective of ``clustergym tune`` is the mean over the study's validation runs of
(V − V_random) / (V_reference − V_random). This script scores given models on the same runs (the record's
env, validation instances, seeds, horizon and env kwargs), with the reference and random values the study
stored, so a row's untuned setting can be set beside the study's trials on one scale.

    python benchmarks/tuning_objective.py runs/tune/MultiServerChannel-v0-ppo-entity \\
        runs/drl2-p1/p1/ppo-entity/seed0/model.zip runs/drl2-p1/p1/ppo-entity/seed1/model.zip
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from clustergym.runner.evaluation import evaluate
from clustergym.learning.tuning import normalised_value, stored_values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", help="a clustergym tune --out folder (tuning.json and study.db)")
    ap.add_argument("models", nargs="+", help="model.zip paths")
    args = ap.parse_args()
    import optuna

    rec = json.load(open(os.path.join(args.study, "tuning.json")))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=rec["study"],
                              storage=f"sqlite:///{os.path.abspath(os.path.join(args.study, 'study.db'))}")
    ref, rnd = stored_values(study)
    inst = rec["validation_instances"]
    instances = None if inst == "instance = seed" else inst
    values = []
    for m in args.models:
        res = evaluate(rec["env_id"], [f"sb3:{m}"], rec["seeds"], rec["horizon"], env_kwargs=rec["env_kwargs"],
                       instances=instances, workers=1, progress=False, score=False)
        got = {(r.instance, r.seed): float(r.value_total) for r in res.runs}
        v = float(np.mean(list(normalised_value(got, ref, rnd).values())))
        values.append(v)
        print(f"{m}: {v:+.3f}")
    done = [t["value"] for t in rec["trials"] if t["value"] is not None]
    print(f"mean over the models {np.mean(values):+.3f}; the study's trials: min {min(done):+.3f}, "
          f"median {np.median(done):+.3f}, best {max(done):+.3f} ({len(done)} trials)")


if __name__ == "__main__":
    main()
