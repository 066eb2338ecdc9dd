"""A trained model acts on one torch thread and leaves the caller's thread setting as it was."""

from __future__ import annotations

import torch

from clustergym.runner.evaluation import evaluate
from clustergym.learning import sb3_agent as sb3_agent


def test_acting_uses_one_thread_and_restores_the_callers_setting(monkeypatch):
    seen = []
    inner = sb3_agent._one_thread

    def spy(fn, *args, **kwargs):
        return inner(lambda *a, **k: (seen.append(torch.get_num_threads()), fn(*a, **k))[1], *args, **kwargs)

    monkeypatch.setattr(sb3_agent, "_one_thread", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        res = evaluate("clustergym/ApproxJobs-v0", ["sb3:pretrained/ApproxJobs-v0"], [0], 6, instances=[2000],
                       progress=False, score=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert res.runs[0].steps == 6 and seen == [1] * 6
