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


# The longest test files (measured: seconds of CPU each), run first: the suite runs on two pytest workers that take
# whole files (`--dist loadfile`, so a module's fixtures are built once), and a long file started last would leave
# the other worker idle at the end. Within a file and among the others the order is pytest's.
LONGEST_FIRST = (
    "runner/test_ray_backend.py", "experiments/test_drl_benchmark.py", "project/test_packaging.py",
    "runner/test_safety.py", "cli/test_replay_models.py", "cli/test_fuzz.py", "contract/test_toy_family.py",
    "runner/test_runstore.py", "learning/test_plain_sb3.py", "cli/test_replay_cli.py",
    "learning/test_learning_imitation.py", "project/test_recipes.py", "cli/test_runner_cli.py",
    "cli/test_smoke_commands.py", "agents/test_approx_agents.py", "agents/test_esdp_kernel.py",
    "learning/test_safety_drl.py", "cli/test_fuzz_hp.py", "experiments/test_reproduce_instances.py",
    "envs/test_viewer.py", "envs/ringallreduce/test_ring_episode_bound.py", "project/test_types.py",
)


def pytest_collection_modifyitems(config, items):
    root = os.path.dirname(os.path.abspath(__file__))
    rank = {os.path.join(root, m): k for k, m in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(str(item.path), len(rank)))  # stable: the rest keep their order
