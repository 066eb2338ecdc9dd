"""Crafted run store files (clustergym.runner.runstore): a file that is not a record the store wrote, or not a
regular file, counts as missing and its run is computed again; none makes a sweep or a plan raise, allocate
what the file cannot hold, or hang. Each case runs under an alarm."""

from __future__ import annotations

import os
import pickle
import signal

import numpy as np
import pytest

from clustergym.runner.runstore import (
    RunStore,
    TaskInfo,
    _SafeUnpickler,
    register_task,
    use_store,
)
from clustergym.runner.workers import run_tasks

CALLS: list = []


def _double(task, report=None):
    CALLS.append(task)
    return {"x": 2 * task[0]}


register_task(_double, describe=lambda t: TaskInfo(agent="double", env_id="toy", horizon=3),
              placeholder=lambda t: {"x": -1})


@pytest.fixture(autouse=True)
def _alarm():
    """A case that hangs (a FIFO opened for reading) fails after 20 s instead of blocking the suite."""
    def stop(*_):  # pytest.fail's exception is no OSError: the store's own error handling cannot swallow it
        pytest.fail("the store hung on a crafted file")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _plant(store: RunStore, task, data: bytes) -> str:
    path = store.path(store.key(_double, task))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _record(result, **meta) -> bytes:
    rec = {"result": result, "fn": "x", "task": "[]", "label": "", "cpu_s": 0.5, "wall_s": 0.5, "agent": "double",
           "env_id": "toy", "horizon": 3, "config": "[]", "code": "c"}
    return pickle.dumps({**rec, **meta}, protocol=4)


def _computed_again(store: RunStore, task=(7,)) -> None:
    CALLS.clear()
    with use_store(store):
        assert run_tasks(_double, [task], 1)[0] == {"x": 2 * task[0]}
    assert CALLS == [task] and store.reused == 0 and store.ran == 1


def _huge_reconstruct() -> bytes:
    """A pickle calling numpy's array reconstructor with 10^13 elements (what pickling an array never writes: it
    passes shape (0,) and the data after), built by hand."""
    mod = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray

    class Huge:
        def __reduce__(self):
            return mod._reconstruct, (np.ndarray, (10 ** 13,), b"b")

    return pickle.dumps({"result": Huge()}, protocol=4)


def _huge_bytes() -> bytes:
    """A pickle calling ``bytearray(10**13)`` (10 TB of zeros from a few bytes)."""
    class Huge:
        def __reduce__(self):
            return bytearray, (10 ** 13,)

    return pickle.dumps({"result": Huge()}, protocol=4)


CRAFTED = {
    "an array, not a record": pickle.dumps(np.zeros(3), protocol=4),
    "a list, not a record": pickle.dumps([1, 2], protocol=4),
    "a record without a result": pickle.dumps({"fn": "x"}, protocol=4),
    "a result of another type": _record(42),
    "an array of 10^13 elements": _huge_reconstruct(),
    "a bytearray of 10^13 bytes": _huge_bytes(),
    "not a pickle": b"\x00garbage",
    "empty": b"",
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_record_is_refused_and_its_run_computed_again(case, tmp_path):
    store = RunStore(str(tmp_path / "s"), code="c")
    _plant(store, (7,), CRAFTED[case])
    found, _, _ = store.load(store.key(_double, (7,)))
    if case != "a result of another type":  # that one is a record: refused by the sweep, as not _double's result
        assert not found
    _computed_again(RunStore(str(tmp_path / "s"), code="c"))


def test_an_array_larger_than_the_file_is_refused_before_it_is_allocated():
    with pytest.raises(pickle.UnpicklingError, match="cannot be held"):
        _SafeUnpickler(_huge_reconstruct()).load()
    arr = np.arange(1000.0)  # what the store writes comes back
    back = _SafeUnpickler(pickle.dumps({"result": arr}, protocol=4)).load()["result"]
    np.testing.assert_array_equal(back, arr)


def test_object_arrays_and_huge_byte_counts_are_refused():
    with pytest.raises(pickle.UnpicklingError, match="object arrays"):
        _SafeUnpickler(pickle.dumps(np.array([None, 1], dtype=object), protocol=4)).load()
    with pytest.raises(pickle.UnpicklingError, match="cannot be held"):
        _SafeUnpickler(_huge_bytes()).load()
    assert _SafeUnpickler(pickle.dumps(bytearray(b"ab"), protocol=4)).load() == bytearray(b"ab")


@pytest.mark.parametrize("meta", [{"horizon": 1e400}, {"horizon": 10 ** 400}, {"horizon": -3}, {"horizon": True},
                                  {"cpu_s": float("nan")}, {"cpu_s": float("inf")}, {"cpu_s": -1.0},
                                  {"cpu_s": "1"}, {"config": 5}])
def test_a_record_with_costs_out_of_range_is_not_counted(meta, tmp_path):
    """A plan's CPU estimate sums the records' costs: one whose horizon or CPU time is out of range (1e400 gives
    an infinite horizon) is left out, the sound ones still count."""
    store = RunStore(str(tmp_path / "s"), code="c")
    _plant(store, (1,), _record({"x": 2}, **meta))
    _plant(store, (2,), _record({"x": 4}, config="[\"sound\"]"))
    costs = store.unit_cost_records()
    assert costs == {"[\"sound\"]": (0.5 / 3, 3)}


def test_a_plan_counts_no_crafted_horizon(tmp_path, capsys):
    """``reproduce --plan`` on a store holding a record with horizon 1e400: the plan is printed, no traceback."""
    from clustergym.cli.main import main
    from clustergym.runner.runstore import code_fingerprint

    out = tmp_path / "r"
    store = RunStore(str(out / "store"), code=code_fingerprint())
    _plant(store, (1,), _record({"x": 2}, horizon=1e400, config="[\"x\"]"))
    assert main(["reproduce", "opm", "--quick", "--tiny", "--instances", "0", "--plan", "--out", str(out)]) == 0
    assert "**Total**" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_like_a_record_is_not_opened(tmp_path, capsys):
    """A FIFO (or any file that is not a regular one) named like a record is skipped, not opened: opening a FIFO
    for reading blocks until a writer comes. Both the sweep and a plan's listing of the records go past it."""
    store = RunStore(str(tmp_path / "s"), code="c")
    path = store.path(store.key(_double, (7,)))
    os.makedirs(os.path.dirname(path))
    os.mkfifo(path)
    assert list(store.records()) == [] and store.unit_cost_records() == {}
    target = tmp_path / "elsewhere.pkl"  # a link, even to a sound record, is not a file the store wrote
    target.write_bytes(_record({"x": 16}))
    link = store.path(store.key(_double, (8,)))
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(target, link)
    assert store.load(store.key(_double, (8,)))[0] is False
    _computed_again(RunStore(str(tmp_path / "s"), code="c"))


def test_a_sound_record_is_still_reused(tmp_path):
    """The checks refuse nothing the store itself writes."""
    with use_store(RunStore(str(tmp_path / "s"), code="c")):
        run_tasks(_double, [(7,)], 1)
    CALLS.clear()
    with use_store(RunStore(str(tmp_path / "s"), code="c")) as again:
        assert run_tasks(_double, [(7,)], 1)[0] == {"x": 14}
    assert CALLS == [] and again.reused == 1
    assert [r["horizon"] for r in again.records()] == [3]


@pytest.mark.parametrize("entry", [[1e400, 5], [0.5, 1e400], [float("nan"), 5], [-1.0, 5], [0.5, 0]])
def test_a_costs_file_with_a_cost_out_of_range_is_one_line(entry, tmp_path, capsys):
    """``--costs-from FILE`` holding an infinite, NaN or negative cost or horizon: one line, exit 2."""
    import json

    from clustergym.cli.main import main

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"unit_costs": {"x": entry}}))
    assert main(["reproduce", "opm", "--quick", "--tiny", "--instances", "0", "--plan", "--out",
                 str(tmp_path / "r"), "--costs-from", str(costs)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--costs-from" in err and "Traceback" not in err, err
