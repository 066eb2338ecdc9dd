"""Strict CSV reading shared by every trace loader.

Malformed files fail with a ``TraceFormatError`` (a ValueError) naming the file, the line and the
column: a missing column, a non-numeric value where a number is expected, an empty file.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

import numpy as np

__all__ = ["TraceFormatError", "Column", "read_csv"]


class TraceFormatError(ValueError):
    """A trace file does not have the published format."""


@dataclass(frozen=True)
class Column:
    name: str
    kind: str = "float"  # "float", "int", "str", "datetime" (seconds since the epoch; naive times are UTC)
    required: bool = True
    default: object = None  # value for an empty cell (None: an empty cell is an error for numbers)
    lo: float | None = None  # smallest valid value of a number (None: any)
    lo_open: bool = False  # True: values must be > lo (e.g. durations, counts that cannot be 0)


# Plain ASCII decimal numbers only: float() also takes "6_6.0", non-ASCII digits and "nan".
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INT_MAX = 2**53  # integers beyond this are not exact in float64 and overflow nothing useful


def _parse(kind: str, text: str, default):
    if text == "" and default is not None:
        return default
    if kind == "str":
        return text
    if kind in ("float", "int"):
        if not text.isascii() or not _NUMBER.fullmatch(text):
            raise ValueError
        v = float(text)
        if not np.isfinite(v):
            raise ValueError
        if kind == "float":
            return v
        if not v.is_integer() or abs(v) > _INT_MAX:
            raise ValueError
        return int(v)
    if kind == "datetime":
        # Trace times are UTC unless the file says otherwise: a naive time never takes the local
        # timezone of the machine reading it (the same file gives the same seconds everywhere).
        d = datetime.fromisoformat(text)
        return (d if d.tzinfo is not None else d.replace(tzinfo=timezone.utc)).timestamp(), d.tzinfo is None
    raise AssertionError(kind)


def read_csv(path: str | os.PathLike, columns: Sequence[Column], *, max_rows: int | None = None) -> dict[str, np.ndarray]:
    """Read ``columns`` of a CSV file with a header line into arrays, validating every cell.

    Returns a dict column name -> array (float64, int64, float64 seconds for datetimes, or object
    for strings). Raises FileNotFoundError for a missing file and TraceFormatError for anything
    malformed, with ``file:line: column 'name': ...`` in the message.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"trace file not found: {path}")
    with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: a byte-order mark is not part of the header
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceFormatError(f"{path}:1: empty file (expected a header line)") from None
        except csv.Error as exc:
            raise TraceFormatError(f"{path}:1: {exc}") from None
        header = [h.strip() for h in header]
        dup = sorted({h for h in header if h and header.count(h) > 1})
        if dup:
            raise TraceFormatError(f"{path}:1: duplicate column(s) {', '.join(map(repr, dup))} in the header")
        naive: dict[str, bool] = {}
        index = {}
        for col in columns:
            if col.name in header:
                index[col.name] = header.index(col.name)
            elif col.required:
                raise TraceFormatError(f"{path}:1: missing column {col.name!r} (header has: {', '.join(header)})")
        out: dict[str, list] = {c.name: [] for c in columns if c.name in index}
        n = 0
        rows = iter(reader)
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as exc:  # e.g. a field over the csv module's size limit
                raise TraceFormatError(f"{path}:{reader.line_num}: {exc}") from None
            lineno = reader.line_num  # physical line (a quoted field may span several)
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) > len(header):  # a stray comma or a shifted row: its columns cannot be trusted
                raise TraceFormatError(f"{path}:{lineno}: the row has {len(row)} fields, the header {len(header)}")
            for col in columns:
                if col.name not in index:
                    continue
                j = index[col.name]
                if j >= len(row):
                    raise TraceFormatError(f"{path}:{lineno}: column {col.name!r} (column {j + 1}) is missing "
                                           f"(row has {len(row)} fields)")
                cell = row[j].strip()
                try:
                    v = _parse(col.kind, cell, col.default)
                except (ValueError, OverflowError):
                    want = {"float": "a number", "int": "an integer", "datetime": "a date-time"}.get(col.kind, col.kind)
                    raise TraceFormatError(f"{path}:{lineno}: column {col.name!r} (column {j + 1}): "
                                           f"{cell!r} is not {want}") from None
                if col.kind == "datetime" and isinstance(v, tuple):
                    v, is_naive = v
                    if naive.setdefault(col.name, is_naive) != is_naive:
                        raise TraceFormatError(f"{path}:{lineno}: column {col.name!r} (column {j + 1}): {cell!r} "
                                               "mixes timezone-aware and naive times in one column")
                if col.lo is not None and col.kind in ("float", "int", "datetime") and (
                        v <= col.lo if col.lo_open else v < col.lo):
                    raise TraceFormatError(f"{path}:{lineno}: column {col.name!r} (column {j + 1}): {cell!r} is out "
                                           f"of range: expected {'>' if col.lo_open else '>='} {col.lo:g}")
                out[col.name].append(v)
            n += 1
            if max_rows is not None and n >= max_rows:
                break
        if n == 0:
            raise TraceFormatError(f"{path}:2: no data rows")
    dtypes = {"float": np.float64, "int": np.int64, "datetime": np.float64, "str": object}
    return {c.name: np.asarray(out[c.name], dtype=dtypes[c.kind]) for c in columns if c.name in out}
