"""The learning-curve statistics of the DRL benchmark's table (clustergym.experiments.drl._curve_stats) on
hand-made curves: the first checkpoint whose mean over the training seeds beats random (``beats_random_from``),
the final models' validation total, and the final models against the untrained ones (``after_vs_before``)."""

import math

import pytest

from clustergym.experiments.drl import _curve_stats


def _pt(steps, total, per_instance):
    return {"steps_trained": steps, "mean_total_reward": total, "per_instance": per_instance}


def _curves():
    # two training seeds, three checkpoints; per-instance totals on instances 7 and 8
    s0 = [_pt(0, 10.0, {7: 10.0, 8: 20.0}), _pt(100, 30.0, {7: 12.0, 8: 22.0}), _pt(200, 60.0, {7: 15.0, 8: 30.0})]
    s1 = [_pt(0, 12.0, {7: 10.0, 8: 20.0}), _pt(100, 36.0, {7: 14.0, 8: 24.0}), _pt(200, 40.0, {7: 15.0, 8: 10.0})]
    return {"ppo": [s0, s1]}


def test_beats_random_from_is_the_first_checkpoint_whose_seed_mean_is_above_random():
    metas = {"ppo": {}}
    # seed means 11, 33, 50: random at 32 is beaten from step 100 on (not at 0, where one seed alone is 10 / 12)
    _curve_stats(_curves(), metas, rand_curve=32.0)
    assert metas["ppo"]["beats_random_from"] == 100
    assert metas["ppo"]["validation_total"] == pytest.approx(50.0)


def test_beats_random_from_needs_a_strict_win_and_is_none_when_never_above():
    metas = {"ppo": {}}
    _curve_stats(_curves(), metas, rand_curve=33.0)  # 33 equals the mean at step 100: not above it
    assert metas["ppo"]["beats_random_from"] == 200
    metas = {"ppo": {}}
    _curve_stats(_curves(), metas, rand_curve=50.0)  # never above
    assert metas["ppo"]["beats_random_from"] is None
    metas = {"ppo": {}}
    _curve_stats(_curves(), metas, rand_curve=5.0)  # above from the untrained models on
    assert metas["ppo"]["beats_random_from"] == 0


def test_after_vs_before_pairs_the_final_and_untrained_models_per_instance():
    metas = {"ppo": {}}
    _curve_stats(_curves(), metas, rand_curve=0.0)
    ab = metas["ppo"]["after_vs_before"]
    # per instance, mean over seeds: first {7: 10, 8: 20}, last {7: 15, 8: 20}: +50% on 7, a tie on 8
    assert (ab["wins"], ab["losses"]) == (1, 0)
    assert ab["mean"] == pytest.approx(25.0)
    assert ab["low"] <= ab["mean"] <= ab["high"] and math.isfinite(ab["low"])
    assert ab["text"].startswith("+25.0% [") and ab["text"].endswith(" 1/0")


def test_after_vs_before_counts_a_loss_when_training_made_an_instance_worse():
    curves = _curves()
    curves["ppo"][1][-1]["per_instance"] = {7: 5.0, 8: 10.0}  # last: {7: 10, 8: 20} -> 7 tied, 8 down by 25%
    curves["ppo"][0][-1]["per_instance"] = {7: 15.0, 8: 20.0}
    metas = {"ppo": {}}
    _curve_stats(curves, metas, rand_curve=0.0)
    ab = metas["ppo"]["after_vs_before"]
    assert (ab["wins"], ab["losses"]) == (0, 1)
    assert ab["mean"] == pytest.approx(-12.5)
