"""Trace CSV reading: published formats read; malformed files name file, line and column."""

import os

import numpy as np
import pytest

from clustergym.envs.traces.csvread import TraceFormatError
from clustergym.envs.traces.philly import load_philly, load_pollux_workload
from tests.helpers import ROOT as REPO_ROOT

SHARED = os.path.join(REPO_ROOT, "..", "shared", "traces")


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


# -- inputs that used to be accepted or crash ---------------------------------------

import subprocess
import sys

from clustergym.envs.traces.csvread import Column, read_csv


def _write(tmp_path, text, name="t.csv", encoding="utf-8"):
    p = tmp_path / name
    p.write_bytes(text.encode(encoding))
    return p


@pytest.mark.parametrize("cell", ["6_6.0", "\u0661\u0662", "nan", "inf", "0x10", " ", "1e400"])
def test_numbers_are_plain_ascii_decimals(tmp_path, cell):
    p = _write(tmp_path, f"a,b\n1,2\n3,{cell}\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:3: column 'b'"):
        read_csv(p, [Column("a", "float"), Column("b", "float")])


def test_huge_integer_is_a_format_error_with_line(tmp_path):
    p = _write(tmp_path, "a\n1\n1e30\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:3: column 'a'.*not an integer"):
        read_csv(p, [Column("a", "int")])


def test_ranges_per_column(tmp_path):
    p = _write(tmp_path, "n,d\n1,5\n0,5\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:3: column 'n'.*expected >= 1"):
        read_csv(p, [Column("n", "int", lo=1), Column("d", "float", lo=0, lo_open=True)])
    p = _write(tmp_path, "n,d\n1,5\n2,0\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:3: column 'd'.*expected > 0"):
        read_csv(p, [Column("n", "int", lo=1), Column("d", "float", lo=0, lo_open=True)])


def test_bom_duplicates_and_physical_lines(tmp_path):
    p = _write(tmp_path, "\ufeffa,b\n1,2\n", encoding="utf-8")
    assert read_csv(p, [Column("a", "int")])["a"].tolist() == [1]  # the BOM is not part of the name
    p = _write(tmp_path, "a,b,a\n1,2,3\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:1: duplicate column"):
        read_csv(p, [Column("a", "int")])
    # a quoted field spanning two physical lines: the bad value is on physical line 4
    p = _write(tmp_path, 'a,s\n1,"x\ny"\nz,q\n')
    with pytest.raises(TraceFormatError, match=r"t\.csv:4: column 'a'"):
        read_csv(p, [Column("a", "int"), Column("s", "str")])


def test_oversized_field_is_a_format_error(tmp_path):
    p = _write(tmp_path, "a,s\n1," + "x" * 200_000 + "\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:2"):
        read_csv(p, [Column("a", "int"), Column("s", "str")])


def test_mixed_naive_and_aware_times_rejected(tmp_path):
    p = _write(tmp_path, "t\n2017-10-03 10:00:00\n2017-10-03 11:00:00+00:00\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:3: column 't'.*mixes"):
        read_csv(p, [Column("t", "datetime")])


def test_naive_trace_times_are_utc_whatever_the_machine_timezone(tmp_path):
    p = _write(tmp_path, "t\n2017-10-03 10:00:00\n2017-07-01 00:00:00\n")
    code = ("import sys; from clustergym.envs.traces.csvread import Column, read_csv; "
            "print(read_csv(sys.argv[1], [Column('t', 'datetime')])['t'].tolist())")
    outs = {}
    for tz in ("UTC", "America/New_York", "Asia/Kolkata"):
        env = {**os.environ, "TZ": tz}
        outs[tz] = subprocess.run([sys.executable, "-c", code, str(p)], env=env, capture_output=True, text=True,
                                  check=True).stdout
    assert len(set(outs.values())) == 1
    assert outs["UTC"].strip() == "[1507024800.0, 1498867200.0]"  # 2017-10-03T10:00Z, 2017-07-01T00:00Z


def test_rows_with_more_fields_than_the_header_are_refused(tmp_path):
    p = _write(tmp_path, "a,b\n1,2\n3,4,5\n")
    with pytest.raises(TraceFormatError, match=r"t\.csv:3: the row has 3 fields, the header 2"):
        read_csv(p, [Column("a", "int"), Column("b", "int")])
