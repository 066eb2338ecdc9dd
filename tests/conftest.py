import os

os.environ.setdefault("MPLBACKEND", "Agg")
# One BLAS/OpenMP thread per test process (and the CLIs they start): the suite runs on two pytest workers, and
# a second thread per worker only spins on the other worker's core.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import clustergym  # noqa: E402,F401  (registers envs)

import signal  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _sigint_left_as_found():
    """No test may leave SIGINT changed in the test process: subprocesses inherit an ignored SIGINT, and
    tests/runner/test_signals.py's Ctrl-C would then never reach the CLI it starts."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"this test left the SIGINT handler changed ({before!r} -> {after!r})")
