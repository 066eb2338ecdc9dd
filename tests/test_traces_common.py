"""Trace CSV reading: published formats read; malformed files name file, line and column."""

import os

import numpy as np
import pytest

from clustergym.envs.traces.csvread import TraceFormatError
from clustergym.envs.traces.philly import load_philly, load_pollux_workload

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces")


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_philly_fixture(tmp_path):
    p = write(tmp_path, "philly.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
              "2017-10-09 07:01:55,66.0,1,66.0,a\n2017-10-09 06:13:03,2951.0,4,11804.0,b\n")
    tr = load_philly(p)
    assert len(tr) == 2 and tr.submit.tolist() == [0.0, 2932.0]  # sorted by submit time
    assert tr.num_gpus.tolist() == [4, 1] and tr.duration.tolist() == [2951.0, 66.0]
    assert tr.slots(600).tolist() == [0, 4]
    assert len(load_philly(p, cluster="a")) == 1


def test_pollux_workload_fixture(tmp_path):
    p = write(tmp_path, "w.csv", "name,time,application,num_replicas,batch_size\nx,29,ncf,1,32\ny,7,c,6,2048\n")
    tr = load_pollux_workload(p)
    assert tr.submit.tolist() == [0.0, 22.0] and tr.num_gpus.tolist() == [6, 1]


@pytest.mark.parametrize("text, match", [
    ("", r"w\.csv:1: empty file"),
    ("timestamp,duration,cluster\n2017-10-09 07:01:55,66,a\n", r"w\.csv:1: missing column 'num_gpus'"),
    ("timestamp,duration,num_gpus\n2017-10-09 07:01:55,66,1\n2017-10-09 07:01:56,abc,1\n",
     r"w\.csv:3: column 'duration' \(column 2\): 'abc' is not a number"),
    ("timestamp,duration,num_gpus\n2017-10-09 07:01:55,66,1.5\n", r"w\.csv:2: column 'num_gpus' \(column 3\): '1.5' is not an integer"),
    ("timestamp,duration,num_gpus\nyesterday,66,1\n", r"w\.csv:2: column 'timestamp' \(column 1\): 'yesterday' is not a date-time"),
    ("timestamp,duration,num_gpus\n2017-10-09 07:01:55,66\n", r"w\.csv:2: column 'num_gpus' \(column 3\) is missing"),
    ("timestamp,duration,num_gpus\n", r"w\.csv:2: no data rows"),
])
def test_malformed_files_name_file_line_column(tmp_path, text, match):
    with pytest.raises(TraceFormatError, match=match):
        load_philly(write(tmp_path, "w.csv", text))


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="trace file not found"):
        load_philly("/nonexistent/philly.csv")


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="real traces are not on this machine")
def test_real_philly_files():
    tr = load_philly(os.path.join(SHARED, "philly-pollux", "philly.csv"))
    assert len(tr) == 82247 and np.all(np.diff(tr.submit) >= 0) and tr.num_gpus.min() >= 1
    w = load_pollux_workload(os.path.join(SHARED, "philly-pollux", "workload-1.5-1.csv"))
    assert len(w) == 240
