"""`clustergym train`: every bad value or combination is one line, exit 2, before the --out folder is made
and before any log line; absurd sizes are refused from an estimate."""

import os

import pytest

from clustergym.cli.main import main

P1 = "clustergym/MultiServerChannel-v0"


@pytest.mark.parametrize("extra, needle", [
    (["--param-draws", "-1"], ">= 0"),
    (["--param-draws", "1000000000000"], "param_draws=1000000000000"),
    (["--net", "entity", "--vec", "native"], "vec='native'"),
    (["--vec", "native", "--param-draws", "2"], "vec='native'"),
    (["--vec", "subproc", "--n-envs", "64"], "subproc"),
])
def test_bad_train_input_is_one_line_before_any_folder_or_log(extra, needle, tmp_path, capsys):
    out = tmp_path / "t"
    rc = main(["train", P1, "--timesteps", "64", "--horizon", "20", "--no-progress", "--out", str(out), *extra])
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert needle in err
    assert cap.out == "" and not os.path.exists(out)


def test_param_draws_help_states_its_range(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert ">= 0" in " ".join(capsys.readouterr().out.split())
