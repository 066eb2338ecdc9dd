import os

os.environ.setdefault("MPLBACKEND", "Agg")

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
