"""Command line: ``clustergym list|run|reproduce|train|tune|drl|import-model|replay|bench``.

The argparse parser (:func:`build_parser`) and the entry point (:func:`main`); what each command does is in
:mod:`clustergym.cli.commands`. Errors are one clear line on stderr and exit code 2; ``--debug`` shows the
traceback.
"""

from __future__ import annotations

import argparse
import sys

from clustergym.cli.commands import (UsageError, cmd_bench, cmd_drl, cmd_import_model, cmd_list, cmd_replay,
                                     cmd_reproduce, cmd_run, cmd_train, cmd_tune)
from clustergym.experiments import list_papers
from clustergym.experiments.alone import experiment_names
from clustergym.core.family import load_plugins
from clustergym.runner.workers import WorkerDied, was_interrupted
from clustergym.core.version import __version__

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``clustergym: error: ...``, exit 2), like every other CLI error."""

    def error(self, message: str):
        hint = f" (see {self.prog} --help)"
        self.exit(2, f"clustergym: error: {message}{hint}\n")



def build_parser() -> argparse.ArgumentParser:
    """The ``clustergym`` parser: the global options, then one subparser per command."""
    p = _Parser(prog="clustergym", description="Online cluster scheduling environments and agents.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    p.add_argument("--version", action="version", version=f"clustergym {_version()}",
                   help="print the installed clustergym version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    debug = _debug_parent()
    for add in (_add_list_parser, _add_run_parser, _add_reproduce_parser, _add_train_parser, _add_tune_parser,
                _add_drl_parser, _add_replay_parser, _add_bench_parser, _add_import_model_parser):
        add(sub, debug)
    return p


def _debug_parent() -> argparse.ArgumentParser:
    """The parent parser of every command: ``--debug`` also after the command name (SUPPRESS: a command line
    without it there keeps the top-level value)."""
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks on errors")
    return debug


def _add_set(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable): an env kwarg with a JSON value."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")


def _add_list_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym list``: the registered envs and their agents."""
    sub.add_parser("list", parents=[debug], help="registered envs and the agents that can act in each").set_defaults(func=cmd_list)


def _add_run_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym run``: agents on one env over instances and seeds."""
    r = sub.add_parser("run", parents=[debug], help="evaluate agents on an env over instances and seeds")
    r.add_argument("env_id", help="a registered env id (clustergym list shows them)")
    r.add_argument("--agents", required=True, help="comma-separated, options in brackets: esdp[only_active=true],hauf")
    r.add_argument("--seeds", default="0", help="dynamics seeds, e.g. 0,1,2 or 0-4; by default the run with "
                                                "seed s uses instance (scenario_seed) s")
    r.add_argument("--instances", default=None, help="scenario seeds, e.g. 0-4: every instance x every seed "
                                                     "(--set scenario_seed=K pins one instance instead)")
    r.add_argument("--no-score", action="store_true",
                   help="skip the normalised score (saves the random reference runs)")
    r.add_argument("--horizon", type=int, default=None, help="slots per run (default: the env's own horizon)")
    _add_set(r)
    r.add_argument("--workers", type=int, default=1, help="parallel worker processes (default 1: in this process)")
    r.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="ray: one Ray task per run on $RAY_ADDRESS or a local Ray with --workers CPUs "
                        "(pip install 'clustergym[ray]'); results equal the local backend's")
    r.add_argument("--out", required=True, help="results folder (results.json, curves.csv, plots)")
    r.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    r.add_argument("--overwrite", action="store_true", help="replace the results of an earlier run in --out")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)


def _add_reproduce_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym reproduce``: a paper's comparisons, or its plan (``--plan``)."""
    rp = sub.add_parser("reproduce", parents=[debug], help="the papers' comparisons with tables, plots and a report")
    rp.add_argument("paper", help=f"one of {', '.join([*list_papers(), 'all'])}")
    rp.add_argument("--quick", action="store_true", help="shorter horizons and fewer seeds")
    rp.add_argument("--out", default="runs/reproduce", help="report folder (report.md, one folder per paper)")
    rp.add_argument("--instances", default=None, metavar="A-B",
                    help="instances (scenario seeds) of every comparison, e.g. 20-29 or 3,5,8 "
                         "(default: 0-9 with --quick, 0-19 without)")
    rp.add_argument("--only", default=None, metavar="EXPERIMENT",
                    help="run one experiment of the paper alone (report.md and results.json of it only): "
                         + "; ".join(f"{p}: {', '.join(experiment_names(p))}" for p in list_papers()
                                     if experiment_names(p)))
    rp.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests of the machinery: a few slots
    rp.add_argument("--workers", type=int, default=2, help="parallel worker processes (default 2)")
    rp.add_argument("--backend", choices=["local", "ray"], default="local",
                    help="where the runs go: local worker processes (default) or Ray tasks (the Ray instance this "
                         "process is connected to, else $RAY_ADDRESS, else a local one with --workers CPUs)")
    rp.add_argument("--no-progress", action="store_true", help="no progress bars")
    rp.add_argument("--overwrite", action="store_true", help="replace an earlier reproduction in --out")
    rp.add_argument("--fresh", action="store_true",
                    help="run everything again: empty the run store (OUT/store) instead of reusing its finished runs")
    rp.add_argument("--plan", action="store_true",
                    help="run nothing: list every experiment's runs, how many OUT/store already holds and the CPU "
                         "hours left, estimated from the unit costs measured on the stored runs (in full mode, then "
                         "on the project's own, docs/data/full/unit_costs.json in a clone)")
    rp.add_argument("--costs-from", default=None, metavar="STORE[,STORE...]",
                    help="with --plan: also take unit costs from these run stores (another machine's, a quick run's) "
                         "or costs files written by --save-costs")
    rp.add_argument("--save-costs", default=None, metavar="FILE",
                    help="with --plan: write the unit costs it used to FILE (JSON, small enough to commit)")
    rp.set_defaults(func=cmd_reproduce)


def _add_train_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym train``: train a Stable-Baselines3 agent on one env."""
    t = sub.add_parser("train", parents=[debug], help="train a Stable-Baselines3 agent (saved model = agent sb3:DIR/model.zip)")
    t.add_argument("env_id", help="a registered env id (clustergym list shows them)")
    t.add_argument("--algo", default=None, choices=["ppo", "a2c", "sac", "maskable_ppo", "recurrent_ppo"],
                   help="the algorithm (sac: Box actions, P2; maskable_ppo: action masks, P1 and P4; default: the "
                        "env's entry in its family's hyperparams/defaults.yml)")
    t.add_argument("--timesteps", type=int, default=None,
                   help="env steps of training (default: n_timesteps of the hyperparameter file's entry)")
    t.add_argument("--out", default=None,
                   help="run directory (model.zip, tb/, training_curve.png, ...; default runs/train/ENV-ALGO-sSEED)")
    _add_set(t)
    t.add_argument("--horizon", type=int, default=None, help="episode length (default: the env's)")
    t.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm hyperparameter (JSON value) on top of the hyperparameter file's entry, "
                        "e.g. --hp n_steps=512 --hp learning_rate=1e-4")
    t.add_argument("--hp-file", default=None, metavar="YML",
                   help="hyperparameters per env id, rl-zoo3 style (default: the shipped files, the family's "
                        "hyperparams/ALGO.yml entry over the default of clustergym/learning/hyperparams/ALGO.yml)")
    t.add_argument("--action-head", default="fast", choices=["fast", "sb3"],
                   help="MultiDiscrete/MultiBinary action distribution: fast (default: one batched tensor op) or "
                        "sb3 (SB3's own, one Categorical per dimension; same maths, slower)")
    t.add_argument("--net", default="mlp", choices=["mlp", "entity", "autoregressive"],
                   help="policy network: mlp (default: SB3's flat MLP), entity (shared weights over P1's "
                        "channels, P2's ports (port mode) or P4's jobs (job mode) with pooling) or autoregressive "
                        "(P3's ring sizes job by job, masked by the GPUs left; docs/drl.md)")
    t.add_argument("--instances", default=None,
                   help="training pool of scenario seeds, e.g. 100-199: each sub-env draws one per episode "
                        "(default 1000-1099, disjoint from run's default instances; --set scenario_seed=K trains "
                        "on one instance)")
    t.add_argument("--param-draws", type=int, default=0, metavar="N",
                   help="also randomise the generator's load and value-law parameters: N settings drawn from the "
                        "family's ranges, one per episode (N >= 0; default 0: the default generator only; docs/drl.md)")
    t.add_argument("--seed", type=int, default=0, help="training seed (SB3's seed; training envs seed, seed+1, ...)")
    t.add_argument("--n-envs", type=int, default=None,
                   help="parallel training envs (default: the hyperparameter file's n_envs, else 4; SAC uses 1)")
    t.add_argument("--eval-freq", type=int, default=0,
                   help="in-training evaluation every N timesteps on held-out seeds (default 0: off; it costs "
                        "training time)")
    t.add_argument("--eval-episodes", type=int, default=2, help="episodes per in-training evaluation (default 2)")
    t.add_argument("--vec", default=None, choices=["auto", "native", "dummy", "subproc"],
                   help="how the training envs are stepped: native (the env's native vector env, one batched call; "
                        "P1, P2, P3 with action_mode=ring_size, P4), dummy (SB3's DummyVecEnv), subproc (one process "
                        "per env) or auto (default: native where it exists for the env kwargs; the hyperparameter "
                        "file's vec when it sets one)")
    t.add_argument("--no-stats", action="store_true", help="do not append the empirical statistics to observations")
    t.add_argument("--no-normalize", action="store_true", help="no VecNormalize")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--overwrite", action="store_true", help="replace an earlier training run in --out")
    t.add_argument("--warm-start", default=None, metavar="AGENT",
                   help="behaviour cloning from this agent's decisions on training instances before PPO / "
                        "MaskablePPO fine-tuning (e.g. esdp, fair; oracle: the family's per-slot oracle, from the "
                        "hidden truth, P1); --timesteps 0 keeps the cloned policy")
    t.add_argument("--bc-steps", type=int, default=None,
                   help="demonstration env steps for --warm-start (default 20000; only with --warm-start)")
    t.add_argument("--bc-epochs", type=int, default=None,
                   help="passes over the demonstrations for --warm-start (default 30; only with --warm-start)")
    t.add_argument("--privileged", default="none", metavar="MODE",
                   help="critic: the critic also sees the family's privileged features from the simulator's hidden "
                        "truth during training; the acting policy never does (default none; docs/drl.md)")
    t.add_argument("--shaping", default="none", metavar="MODE",
                   help="oracle: the training reward is the reward minus the per-slot oracle's value of the slot "
                        "(default none; evaluation rewards are unchanged; docs/drl.md)")
    t.add_argument("--verbose", type=int, default=0, help="SB3's verbosity: 0 (default), 1 or 2")
    t.set_defaults(func=cmd_train)


def _add_tune_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym tune``: an Optuna study of an algorithm's hyperparameters."""
    tu = sub.add_parser("tune", parents=[debug], help="tune an algorithm's hyperparameters on validation instances "
                        "(Optuna; resumable, shareable storage)")
    tu.add_argument("env_id", help="a registered env id")
    tu.add_argument("--algo", default=None, choices=["ppo", "a2c", "maskable_ppo"],
                    help="the algorithm (default: the env's entry in its family's hyperparams/defaults.yml)")
    tu.add_argument("--trials", type=int, default=20, help="trials this process runs (default 20)")
    tu.add_argument("--timesteps", type=int, default=100_000, help="env steps of training per trial (default 100000)")
    tu.add_argument("--instances", default=None,
                    help="validation instances the trials are scored on (default 900-909; never the training pool "
                         "1000-1099 nor the evaluation instances 0-99); 'seed': instance = seed over --seeds (the "
                         "default of a family whose instances pair with seeds: one run per instance, each with its own seed)")
    tu.add_argument("--seeds", default=None, help="dynamics seeds of the validation runs (default 0; 900-909 "
                    "where instance = seed)")
    tu.add_argument("--horizon", type=int, default=200, help="slots per training episode and validation run "
                    "(default 200)")
    tu.add_argument("--reference", default=None, metavar="AGENT",
                    help="the baseline that scores 1 (default: lcf, drf, greedy, fair for P1-P4)")
    _add_set(tu)
    tu.add_argument("--n-envs", type=int, default=None, help="training envs per trial (default 4)")
    tu.add_argument("--train-seeds", type=int, default=2, help="training seeds per trial; the trial is scored on "
                    "their mean per validation run (default 2)")
    tu.add_argument("--net", default="mlp", choices=["mlp", "entity", "autoregressive"],
                    help="the policy network the trials train (default mlp; entity: the per-entity network; "
                    "autoregressive: P3's masked decoder of ring sizes)")
    tu.add_argument("--seed", type=int, default=0, help="the sampler's seed (trial k trains with seed + k, its "
                    "training seed j > 0 with seed + k + 1000 j)")
    tu.add_argument("--storage", default=None, metavar="URL",
                    help="Optuna storage shared by several tuning processes or machines (default: sqlite in --out)")
    tu.add_argument("--study", default=None, help="study name (default ENV-ALGO, ENV-ALGO-entity with --net entity); "
                    "an existing study is continued, with its own settings (other ones are refused)")
    tu.add_argument("--out", default=None, help="folder of tuning.json and the default storage "
                    "(default runs/tune/STUDY)")
    tu.add_argument("--no-progress", action="store_true", help="no line per trial")
    tu.set_defaults(func=cmd_tune)


def _add_drl_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym drl``: the learned-scheduler benchmark."""
    d = sub.add_parser("drl", parents=[debug], help="the learned-scheduler benchmark: train on an instance pool, "
                       "evaluate on held-out instances beside the paper policies (resumable)")
    d.add_argument("--out", default=None, help="benchmark folder; finished cells in it are reused (default runs/drl; "
                   "--quick: runs/drl-quick; one folder holds one of the two)")
    d.add_argument("--envs", default=None, help="comma-separated: p1,p2,p3,p4, p3s (P3 on its gpu-short "
                   "scenario), p1-privileged,p2-privileged (the privileged-training ablations, on validation "
                   "instances) (default: all; --quick: p4)")
    d.add_argument("--learners", default=None, help="only these learners, e.g. ppo,maskable_ppo")
    d.add_argument("--seeds", default=None, help="training seeds (default 0-2; --quick: 0,1)")
    d.add_argument("--quick", action="store_true", help="CI-sized: tiny budgets, horizon 50, P4 unless --envs")
    d.add_argument("--workers", type=int, default=2, help="cells trained in parallel (one process each; with --backend "
                   "ray the CPUs of the local Ray instance it starts)")
    d.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="where the cells train: local processes (default) or Ray tasks (the Ray instance this process "
                        "is connected to, else $RAY_ADDRESS, else a local one; on a cluster --out must be on a shared "
                        "file system)")
    d.add_argument("--figures", default=None, help="also copy the learning-curve figures here (docs/figures)")
    d.add_argument("--export-pretrained", action="store_true",
                   help="replace the shipped sb3:pretrained/<EnvName> models with each env's best main learner on "
                        "the validation runs of the curves, at the env's default horizon where it has several main "
                        "rows (its lowest training seed); only from the full benchmark with every learner")
    d.add_argument("--no-progress", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_drl)


def _add_replay_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym replay``: one or two agents' episode as an animation."""
    v = sub.add_parser("replay", parents=[debug], help="an agent's episode as an animation (GIF/MP4), or two agents "
                       "side by side on the same instance and seed")
    v.add_argument("env_id", help="a registered env id (clustergym list shows them)")
    v.add_argument("--agents", required=True, help="one agent, or two comma-separated (side by side), e.g. esdp,lcf")
    v.add_argument("--seed", type=int, default=0, help="dynamics seed (and instance, unless --set scenario_seed=K)")
    v.add_argument("--horizon", type=int, default=None, help="episode length (default: the env's)")
    v.add_argument("--every", type=int, default=None,
                   help="slots between frames (default: about 100 frames per episode)")
    v.add_argument("--fps", type=float, default=8.0, help="frames per second of the animation (0.01 to 100)")
    _add_set(v)
    v.add_argument("--out", required=True, help="the animation file: .gif, or .mp4 (needs imageio-ffmpeg: pip install 'clustergym[video]')")
    v.add_argument("--overwrite", action="store_true", help="replace an existing --out file (only once the new "
                   "animation is complete)")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.set_defaults(func=cmd_replay)


def _add_bench_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym bench``: the performance table."""
    b = sub.add_parser("bench", parents=[debug], help="performance table")
    b.add_argument("--only", default=None, metavar="PAPER", help=f"one of {', '.join(list_papers())}, or training (the "
                   "PPO training-throughput rows beside CartPole)")
    b.add_argument("--quick", action="store_true", help="fewer repetitions")
    b.add_argument("--tiny", action="store_true", help="smoke-test sizes (implies --quick): every row runs end to end "
                   "at the smallest counts; the figures mean nothing")
    b.add_argument("--out", default=None, help="also write the table as JSON here")
    b.set_defaults(func=cmd_bench)


def _add_import_model_parser(sub, debug: argparse.ArgumentParser) -> None:
    """``clustergym import-model``: a plain SB3 model made an ``sb3:`` agent."""
    im = sub.add_parser("import-model", parents=[debug], help="make a model trained with plain Stable-Baselines3 "
                        "(MultiInputPolicy on gym.make(ENV), or MlpPolicy on FlattenObservation(gym.make(ENV))) an "
                        "sb3: agent: checks its spaces, writes the side-car")
    im.add_argument("model", help="the model.zip SB3 saved")
    im.add_argument("--env", dest="env_id", required=True, help="the env id it was trained on (clustergym list shows them)")
    im.add_argument("--algo", default="ppo", choices=["ppo", "a2c", "sac", "maskable_ppo"],
                    help="the SB3 algorithm it was trained with (default ppo)")
    im.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an env kwarg it was trained with (JSON value), e.g. --set scenario_seed=3, its padding, or "
                         "--set 'instances=[100,101,102]' (the pool it was trained on)")
    im.add_argument("--out", required=True, help="run folder to write (model.zip, clustergym.json); then sb3:OUT")
    im.add_argument("--overwrite", action="store_true", help="replace an earlier model in --out")
    im.add_argument("--vecnormalize", default=None, metavar="FILE",
                    help="the VecNormalize statistics it was trained with (the file VecNormalize.save wrote)")
    im.set_defaults(func=cmd_import_model)


def _version() -> str:
    return __version__


def _interrupt_message(exc, args) -> str:
    """The one line of an interrupted command: the runner's count of finished runs when it has one."""
    text = str(exc).strip() if exc is not None else ""
    if text and text != "terminated":
        return text
    what = "terminated" if text == "terminated" else "interrupted"
    kept = {"train": "; nothing in --out was replaced (an earlier run there is intact)",
            "drl": "; finished cells are kept, the cells in training were discarded",
            "import-model": "; nothing was written"}.get(getattr(args, "command", ""), "; nothing was written")
    return what + kept


_STOP = ""  # "interrupted" (SIGINT) or "terminated" (SIGTERM) once a stop has arrived
_RECHECK_S = 0.05  # a stop that arrives inside an import is acted on when the import has finished
_REPEAT_S = 1.0  # a stop that compiled code swallowed is raised again after this long
_LOCK_WAIT_S = 1.0  # a stop that arrives inside thread-synchronisation code waits at most this long
_LOCK_SINCE: float | None = None  # when the stop now waiting for the thread-synchronisation code arrived


def _in_import(frame) -> bool:
    """Whether ``frame`` runs inside an import (an importlib frame on its stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _in_lock_code(frame) -> bool:
    """Whether the innermost frame runs the standard library's thread-synchronisation code (``threading``,
    ``queue``), where an exception raised between two statements leaves a lock held or a condition's waiters
    inconsistent (a ``Condition.__enter__`` that has acquired its lock but not returned, a ``notify`` that has
    released a waiter but not removed it). TensorBoard's event writer is such code: its queue is used on every
    logged step, and a writer left in that state never finishes its ``close``."""
    import queue
    import threading

    return frame is not None and frame.f_code.co_filename in (threading.__file__, queue.__file__)


def _wait_for_lock_code(frame) -> bool:
    """Whether a stop should wait for ``frame`` to leave thread-synchronisation code: yes for up to
    ``_LOCK_WAIT_S`` s after it arrived. After that the main thread is blocked in a wait (a lock's
    ``acquire`` inside the ``try`` that restores the condition's state), where raising is safe."""
    import time

    global _LOCK_SINCE
    if not _in_lock_code(frame):
        return False
    _LOCK_SINCE = _LOCK_SINCE if _LOCK_SINCE is not None else time.monotonic()
    return time.monotonic() - _LOCK_SINCE < _LOCK_WAIT_S


def _on_stop(signum, frame):
    """Ctrl-C (SIGINT) and SIGTERM stop a command with a KeyboardInterrupt, and the stop cannot be lost.

    Inside an import the stop waits until the import has finished: compiled extensions being imported
    (numba's) turn an exception raised there into an ImportError or lose it, so the command would fail with
    a traceback or run on. Inside the standard library's thread-synchronisation code it waits (at most
    ``_LOCK_WAIT_S`` s) until that code has returned (:func:`_in_lock_code`): a TensorBoard writer
    interrupted there left ``train``'s cleanup waiting for its thread. Compiled code running (numba
    compiling a kernel, whose ctypes callback prints "Exception ignored" and drops it) may swallow the
    KeyboardInterrupt, so a timer (SIGALRM) raises it again every ``_REPEAT_S`` s until :func:`main` has
    caught it, unless the stop is being handled at that moment (the cleanup in an ``except``/``finally`` block
    runs to its end). Where there is no such timer (Windows), the stop is immediate and raised once."""
    import signal

    global _STOP, _LOCK_SINCE
    if signum != getattr(signal, "SIGALRM", None):
        _STOP = _STOP or ("terminated" if signum == signal.SIGTERM else "interrupted")
    if hasattr(signal, "setitimer"):
        signal.signal(signal.SIGALRM, _on_stop)
        if _in_import(frame) or _wait_for_lock_code(frame):
            signal.setitimer(signal.ITIMER_REAL, _RECHECK_S)
            return
        signal.setitimer(signal.ITIMER_REAL, _REPEAT_S)
        if signum == signal.SIGALRM and was_interrupted(sys.exc_info()[1]):
            return  # the stop is on its way out: nothing swallowed it
    _LOCK_SINCE = None
    raise KeyboardInterrupt("terminated" if _STOP == "terminated" else "")


def _drop_lost_stops(hook):
    """``sys.unraisablehook`` that keeps quiet about a KeyboardInterrupt compiled code lost (it comes again,
    :func:`_on_stop`) and, once a stop has arrived, about every exception Python cannot raise: the stop left
    objects half-built (llvmlite's ``ObjectRef`` stopped before it set its handle), whose finalisers fail when
    the collector runs them, late, down to the interpreter's exit. The command still ends on its one line.
    Before a stop, everything else goes to ``hook``."""
    def unraisable(info):
        if not (_STOP or isinstance(info.exc_value, KeyboardInterrupt)):
            hook(info)
    return unraisable


def _stop_timer() -> None:
    """Stop the timer a stop armed (:func:`_on_stop`)."""
    import signal

    if _STOP and hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # user families: $CLUSTERGYM_PLUGINS and the entry-point group clustergym.families

        load_plugins()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is one line too, unless --debug
        if args.debug:
            raise
        print(f"clustergym: error: plugin: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
              file=sys.stderr)
        return 2
    global _STOP, _LOCK_SINCE
    _STOP, _LOCK_SINCE = "", None
    old = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM stops a run like Ctrl-C: the worker processes are terminated, nothing half-written is left.
        # A Ctrl-C ignored by the caller (a background job) stays ignored.
        old = {sig: signal.signal(sig, _on_stop) for sig in (signal.SIGTERM, signal.SIGINT)
               if sig == signal.SIGTERM or signal.getsignal(sig) is not signal.SIG_IGN}
    unraisable = sys.unraisablehook
    sys.unraisablehook = _drop_lost_stops(unraisable)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        _stop_timer()
        print(f"clustergym: {_interrupt_message(exc, args)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `clustergym list | head`: the reader left; not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a full disk, ulimit -f, a folder removed under us: one line, the earlier run intact
        if args.debug:
            raise
        if exc.errno is None:  # raised by us with a message (e.g. FileNotFoundError("no SB3 model at ..."))
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        else:
            where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
            msg = (f"{exc.strerror or type(exc).__name__}{':' if where else ''}{where} (nothing in --out was "
                   "replaced: an earlier run there is intact)")
        print(f"clustergym: error: {msg}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - user errors are one line; everything else too, unless --debug
        import gymnasium

        _stop_timer()
        if (was_interrupted(exc) or _STOP) and not args.debug:  # Ctrl-C / SIGTERM that compiled code wrapped
            print(f"clustergym: {_interrupt_message(None, args)}", file=sys.stderr)
            return 130

        if not isinstance(exc, (UsageError, ValueError, TypeError, FileNotFoundError, gymnasium.error.Error,
                                WorkerDied)):
            raise
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"clustergym: error: {msg}", file=sys.stderr)
        return 2
    finally:
        if not _STOP:  # after a stop the hook stays: half-built objects are finalised up to the exit
            sys.unraisablehook = unraisable
        if old is not None:
            for sig, handler in old.items():
                signal.signal(sig, handler)
            if hasattr(signal, "setitimer"):
                signal.setitimer(signal.ITIMER_REAL, 0)  # no deferred stop outlives the command
