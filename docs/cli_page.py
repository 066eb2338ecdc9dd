"""The command-line reference page, generated from the argparse parser (read by ``docs/gen_pages.py``),
and the rules every output folder follows, written by hand below the generated part."""

from __future__ import annotations

import argparse
import os
import textwrap


def _cell(s: str) -> str:
    """Text safe inside a Markdown table cell."""
    return s.replace("|", "\\|")


def cli_page() -> str:
    from clustergym.cli.main import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps usage to the terminal width: fix it, so the page is stable
    parser = build_parser()
    out = ["# Command line", "",
           "`clustergym` (also `python -m clustergym`). Generated from the argparse parser "
           "(`clustergym.cli.main.build_parser`). Errors are one line on stderr with exit code 2; "
           "`--debug` (before or after the subcommand) shows the traceback.", "",
           "```text", parser.format_usage().strip(), "```", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    for cmd, p in sub.choices.items():
        out += [f"## clustergym {cmd}", "", helps.get(cmd, "") or "", "",
                "```text", textwrap.dedent(p.format_usage()).strip(), "```", "",
                "| argument | default | help |", "|---|---|---|"]
        for a in p._actions:
            if isinstance(a, argparse._HelpAction) or a.help == argparse.SUPPRESS:  # hidden options are not listed
                continue
            flag = ", ".join(a.option_strings) or a.dest
            if a.choices:
                flag += " {" + ",".join(map(str, a.choices)) + "}"
            if a.required and a.option_strings:
                default = "required"
            elif not a.option_strings:
                default = "positional"
            elif a.default is argparse.SUPPRESS or a.default is None or a.default == []:
                default = ""
            else:
                default = f"`{a.default}`"
            out.append(f"| `{_cell(flag)}` | {default} | {_cell(a.help or '')} |")
        out.append("")
    out += OUTPUT_FOLDERS.strip("\n").splitlines() + [""]
    return "\n".join(out)


OUTPUT_FOLDERS = """
## Output folders: nothing lost

`run`, `train`, `reproduce` and `import-model` write a folder (`--out`) the same way (`clustergym/core/outdir.py`);
`drl` keeps its cells in its folder and follows the same rules (docs/drl.md):

1. **Everything is checked before the disk is touched**: arguments, agents, env kwargs and the folder
   itself: it must resolve (a symlink loop, a broken link or a file on the way is one line), every
   name must fit the file system (`NAME_MAX`, usually 255 bytes, and `PATH_MAX`), it must be writable,
   and the free space and the file-size limit (`ulimit -f`) must hold the estimated output.
2. **A folder holding an earlier run is refused** unless `--overwrite` is given. `--overwrite` removes
   exactly what the earlier command listed in `.clustergym-files.json`; that manifest is validated
   first (`{"files": [plain names directly inside --out]}`; anything else is one line, nothing deleted).
3. **One writer per folder**: the command holds `--out/.clustergym.lock` (the `filelock` package) from
   start to end; a second `run`, `train`, `reproduce` or `drl` on the same folder gets one line naming
   the holder (pid, host, command) and exit code 2.
4. **Write beside, then swap**: the new files are written into a staging folder inside `--out` and
   renamed into place only when the command has finished, so an error, Ctrl-C, SIGTERM, `kill -9` or a
   full disk at any point leaves the earlier run byte-identical (leftover staging folders of a killed
   command are removed by the next one).

**Ctrl-C** (or SIGTERM) is one line and exit code 130, also when it lands inside compiled code (ESDP's
numba kernels, torch during `train`): `run` says how many runs had finished (none is written), `train`
that the earlier run in `--out` is intact. The progress bar's ETA is weighted by each agent's measured
seconds per slot (runs go round-robin over the agents, so each is measured early; results come in the
order asked), so a sweep with ESDP beside cheap baselines no longer swings between minutes and an hour.
`clustergym --version` prints the installed version.

Worker processes (`--workers N`) die with the command, even when it is killed with `kill -9` (Linux
parent-death signal; elsewhere a watchdog on the parent's pid). A worker that dies (killed, out of
memory) costs its run, not the sweep: finished runs are kept, the unfinished ones run again in new
workers (one line on stderr says so); a run whose worker dies a second time is one line naming it.

Limits stated up front: at most 100,000 `--seeds`, `--instances` and instances x seeds per command
(and per call of the Python API: `evaluate(..., instances=range(0, 10**15))` is one error at once);
every real scenario parameter lies in [-1e9, 1e9] (a lower bound open at 0 means >= 1e-9), so no
accepted configuration gives NaN or infinite rewards; size parameters are checked against the memory
available (and P1's knapsack grid against a work limit) before anything is allocated. `results.json`
is strict JSON: a value that is not finite is written as `null` and listed under `non_finite`. A plugin
(`CLUSTERGYM_PLUGINS`, entry points) that fails or whose import does not return within
`CLUSTERGYM_PLUGIN_TIMEOUT` seconds (default 30) is one line naming it; `import clustergym` still works.
<<<<<<< HEAD
An env's `instances=` takes a range of any length (checked without walking it) or at most 1,000,000
listed seeds; a `--set` value nests lists at most 32 deep; an agent listed twice in `--agents` is
refused; `--horizon` (and P4's `horizon=`) is checked against the memory available before the first slot.
`--costs-from` refuses a unit cost that is not finite, negative or beyond 1e6 CPU seconds per slot, and
a folder holding no measured runs (naming its `store/` when it has one). `--save-costs` and
`bench --out` write only a new path or a regular file (never a FIFO or a device such as `/dev/null`),
through `FILE.tmp` created exclusively: a second writer at the same time gets one line, and a file
another program created meanwhile is left as it is.
=======

`train` checks what it is given before it builds anything. Hyperparameters (`--hp`, the files): each key must
be one the algorithm takes (the first few unknown keys are named, then "... and N more"), each known value
finite and in range (`gamma` and `gae_lambda` in [0, 1], `learning_rate`, `clip_range` and `max_grad_norm`
> 0, `n_steps` and `batch_size` integers from 1 to 10^8, ...), each flag (`normalize`,
`normalize_advantage`, ...) a YAML/JSON `true` or `false` (`"no"` is an error, not True); `--seed` is an
integer from 0 to 2^32 - 1 - n_envs; `--param-draws` at most 10,000. A hyperparameter file is UTF-8 YAML of at
most 1 MiB, nested at most 32 levels, with at most 100,000 values counting every alias as the values it
repeats; every error names the file. The memory the run needs (the training envs, the rollout or replay
buffer, the network with its gradients and optimiser state, from `--n-envs`, `n_steps`, `buffer_size` and
`policy_kwargs`' `net_arch`) is checked against the memory available before anything is allocated. A run
whose weights end up NaN or infinite (training diverged) is not saved, and such a model is not loaded by
`sb3:` or `import-model`; a `model.zip` whose data is nested deeper than 64 levels is refused.
>>>>>>> hpguard
"""
