"""Ctrl-C and SIGTERM stop a parallel run cleanly: no worker survives, nothing half-written is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import alive as _alive, children as _children


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux) to list child processes")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_every_worker_and_writes_nothing(tmp_path, sig):
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "clustergym", "run", "clustergym/MultiServerChannel-v0",
                             "--agents", "hauf,lcf", "--seeds", "0-3", "--horizon", "200000", "--workers", "2",
                             "--no-progress", "--no-score", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a CLI started from a terminal: a suite run as a background job (`cmd &`) has
                            # SIGINT ignored, which its children would inherit (and Ctrl-C never reach them)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 90
        kids: set[int] = set()
        while time.time() < deadline:  # wait until both workers run
            kids |= set(_children(proc.pid))
            workers = [k for k in _children(proc.pid) if "spawn_main" in open(f"/proc/{k}/cmdline").read()]
            if len(workers) >= 2:
                break
            time.sleep(0.2)
        assert len(workers) >= 2, "the workers never started"
        time.sleep(1.0)
        kids |= set(_children(proc.pid))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted after 0 of 8 runs" in lines[0], err
    time.sleep(0.5)
    assert not [k for k in kids if _alive(k)], "a child process survived"
    assert not out.exists()  # results are complete or absent: here absent


def test_a_sigterm_during_an_import_stops_the_command_once_the_import_has_finished(tmp_path):
    """A compiled extension being imported (numba's) turns an exception raised inside the import into an
    ImportError or loses it; so SIGTERM arriving mid-import stops the command just after the import."""
    (tmp_path / "slowmod.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\nt = time.time()\n"
        "while time.time() - t < 0.3:\n    pass\nDONE = True\n")
    script = (f"import signal, sys, time\nsys.path.insert(0, {str(tmp_path)!r})\nimport clustergym.cli.main as cli\n"
              "signal.signal(signal.SIGTERM, cli._on_stop)\ntry:\n    import slowmod\n    time.sleep(5)\n"
              "    print('not stopped')\nexcept KeyboardInterrupt:\n    print('stopped', 'slowmod' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "stopped True", out.stdout + out.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_stop_that_compiled_code_swallowed_is_raised_again(sig):
    """Compiled code may lose the KeyboardInterrupt a Ctrl-C or SIGTERM raised: it comes again a second
    later, so the command still stops."""
    script = ("import os, signal, sys, time\nimport clustergym.cli.main as cli\n"
              f"signal.signal(signal.{sig}, cli._on_stop)\ntry:\n    os.kill(os.getpid(), signal.{sig})\n"
              "    time.sleep(0.5)\nexcept KeyboardInterrupt:\n    pass  # swallowed\nt = time.time()\ntry:\n"
              "    while time.time() - t < 10:\n        pass\n    print('ran on')\nexcept KeyboardInterrupt:\n"
              "    print('stopped again', round(time.time() - t) <= 2)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "stopped again True", out.stdout + out.stderr


def test_a_ctrl_c_lost_in_a_ctypes_callback_still_stops_quietly():
    """numba compiles through llvmlite, whose ctypes callbacks print "Exception ignored" and drop a
    KeyboardInterrupt raised inside them: the command stops anyway, and nothing is printed about the lost one."""
    script = ("import ctypes, os, signal, sys, time\nimport clustergym.cli.main as cli\n"
              "signal.signal(signal.SIGINT, cli._on_stop)\nsys.unraisablehook = cli._drop_lost_stops(sys.unraisablehook)\n"
              "def compiling():\n    os.kill(os.getpid(), signal.SIGINT)\n    t = time.time()\n"
              "    while time.time() - t < 0.3:\n        pass\n"
              "t = time.time()\ntry:\n    ctypes.CFUNCTYPE(None)(compiling)()\n    while time.time() - t < 10:\n"
              "        pass\n    print('ran on')\nexcept KeyboardInterrupt:\n    print('stopped', round(time.time() - t) <= 2)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "stopped True" and not out.stderr, out.stdout + out.stderr


_HALF_BUILT = """
import argparse, os, signal, sys, time
import clustergym.cli.main as cli
class Half:  # a compiled library's handle object, as llvmlite's ObjectRef: its finaliser needs its handle
    def __init__(self):
        self.me = self  # in a reference cycle: the collector finalises it late, down to the exit
        if STOP:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        else:
            raise ValueError("no handle")
        self.handle = 1
    def __del__(self):
        self.handle
def command(args):
    Half()
parser = argparse.ArgumentParser()
parser.add_argument("--debug", action="store_true")
parser.set_defaults(func=command, command="x")
cli.build_parser = lambda: parser
sys.exit(cli.main([]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="preexec_fn (POSIX)")
@pytest.mark.parametrize("stop", [True, False], ids=["stopped", "not-stopped"])
def test_a_ctrl_c_inside_a_constructor_ends_on_one_line(stop):
    """A Ctrl-C that interrupts an object's constructor leaves it half-built; its finaliser then fails when
    the collector runs it, after the command's line or at the exit. The command still ends on its one line;
    without a stop, a failing finaliser is reported as Python reports it."""
    out = subprocess.run([sys.executable, "-c", _HALF_BUILT.replace("STOP", str(stop))], capture_output=True,
                         text=True, timeout=60, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    if stop:
        assert out.returncode == 130 and out.stderr.strip() == "clustergym: interrupted; nothing was written", out.stderr
    else:
        assert out.returncode == 2 and "Exception ignored in" in out.stderr and "AttributeError" in out.stderr


def test_the_cleanup_of_a_stop_is_not_interrupted_by_its_repeat():
    """The repeat comes only when the stop was lost: a cleanup in an ``except`` or ``finally`` block that
    takes longer than the repeat's delay runs to its end."""
    script = ("import os, signal, sys, time\nimport clustergym.cli.main as cli\n"
              "signal.signal(signal.SIGINT, cli._on_stop)\nsteps = []\n"
              "def slow_cleanup(name):\n    t = time.time()\n    while time.time() - t < 2.5 * cli._REPEAT_S:\n"
              "        pass\n    steps.append(name)\n"
              "try:\n    try:\n        try:\n            os.kill(os.getpid(), signal.SIGINT)\n"
              "            time.sleep(5)\n        except KeyboardInterrupt:\n            slow_cleanup('except')\n"
              "            raise\n    finally:\n        slow_cleanup('finally')\n"
              "except KeyboardInterrupt:\n    signal.setitimer(signal.ITIMER_REAL, 0)\n    print(*steps)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "except finally", out.stdout + out.stderr


_QUEUE_STOPS = '''
import os, queue, random, signal, sys, threading, time
import clustergym.cli.main as cli
q = queue.Queue(10)  # a logger's queue with its writer thread, as TensorBoard's event writer has
def writer():
    while True:
        q.get(); q.task_done()
threading.Thread(target=writer, daemon=True).start()
signal.signal(signal.SIGPROF, lambda signum, frame: cli._on_stop(signal.SIGINT, frame))
rng, last = random.Random(0), [time.time()]
def watchdog():
    while time.time() - last[0] < 5:
        time.sleep(0.2)
    print("hangs at stop", i, flush=True)
    os._exit(0)
threading.Thread(target=watchdog, daemon=True).start()
broken = 0
for i in range(STOPS):
    cli._STOP, cli._LOCK_SINCE, last[0] = "", None, time.time()
    signal.setitimer(signal.ITIMER_PROF, rng.uniform(0.0001, 0.003))  # a stop after 0.1-3 ms of CPU time
    try:
        while True:
            t = time.perf_counter()
            while time.perf_counter() - t < 2e-5:
                pass
            q.put(b"x"); q.join()  # log a record and flush, as SB3 does at every dump
    except KeyboardInterrupt:
        pass
    except (RuntimeError, ValueError):  # "release unlocked lock", "task_done() called too many times"
        broken += 1
    signal.setitimer(signal.ITIMER_REAL, 0)
    broken += q.mutex.locked()
print("broken", broken, "of", i + 1, flush=True)
'''


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX interval timers")
def test_a_stop_inside_a_loggers_queue_leaves_the_queue_usable():
    """A KeyboardInterrupt raised inside ``threading``/``queue`` code between two of its statements leaves a lock
    held or a condition's waiters inconsistent; a TensorBoard writer interrupted there never finishes ``close``
    (the cleanup of an interrupted ``train`` waited on it). The stop waits until that code has returned: a
    queue used like TensorBoard's and stopped 150 times at random moments stays usable (raised at once, it
    hangs within a few dozen stops)."""
    out = subprocess.run([sys.executable, "-c", _QUEUE_STOPS.replace("STOPS", "150")], capture_output=True,
                         text=True, timeout=240)
    assert out.stdout.strip() == "broken 0 of 150", out.stdout + out.stderr
