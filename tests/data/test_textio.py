"""The numba text parser against Python's own number parsing, and its error messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnntrain.data import DataError
from gnntrain.data.textio import read_rows, read_table
from tests.data.conftest import write_text


def test_floats_match_python_float(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vals = np.concatenate([rng.normal(size=300) * 10.0 ** rng.integers(-30, 30, 300),
                           rng.integers(-10**6, 10**6, 100).astype(float)])
    texts = [repr(float(v)) for v in vals] + ["1e5", "-2.5E-3", "+7", ".5", "5.", "0.000001",
                                             "123456789012345678901234567890", "1e-320"]
    text = "".join(f"{t},{t}\n" for t in texts)
    got = read_table(write_text(tmp_path / "f.csv", text), kind="float",
                     dtype=np.float64).values
    want = np.array([float(t) for t in texts])
    assert got.shape == (len(texts), 2)
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(got[:, 0], got[:, 1])


def test_nan_and_inf_tokens_parse(tmp_path: Path) -> None:
    t = read_table(write_text(tmp_path / "f.txt", "nan 1\n-inf 2\nInfinity 3\nNaN 4\n"),
                   kind="float", dtype=np.float64).values
    assert np.isnan(t[0, 0]) and t[1, 0] == -np.inf and t[2, 0] == np.inf and np.isnan(t[3, 0])
    np.testing.assert_array_equal(t[:, 1], [1, 2, 3, 4])


@pytest.mark.parametrize("sep,name", [(",", "e.csv"), ("\t", "e.tsv"), ("  ", "e.txt"),
                                      (";", "e.csv"), (", ", "e.csv")])
def test_int_edge_lists_in_each_separator(tmp_path: Path, sep: str, name: str) -> None:
    rng = np.random.default_rng(1)
    e = rng.integers(0, 10**12, (500, 2))
    text = "".join(f"{a}{sep}{b}\n" for a, b in e)
    t = read_table(write_text(tmp_path / name, text), kind="int")
    assert t.header is None and t.values.dtype == np.int64
    np.testing.assert_array_equal(t.values, e)


def test_header_comments_blank_lines_crlf_and_gzip(tmp_path: Path) -> None:
    text = "# SNAP style comment\n\nid_1,id_2\r\n0,1\r\n# mid comment\n2,3\r\n\n4,5"
    for name in ("e.csv", "e.csv.gz"):
        t = read_table(write_text(tmp_path / name, text), kind="int")
        assert t.header == ["id_1", "id_2"]
        np.testing.assert_array_equal(t.values, [[0, 1], [2, 3], [4, 5]])
        np.testing.assert_array_equal(t.column("id_2"), [1, 3, 5])


def test_negative_ids_are_read_not_dropped(tmp_path: Path) -> None:
    t = read_table(write_text(tmp_path / "e.csv", "0,-3\n1,2\n"), kind="int")
    np.testing.assert_array_equal(t.values, [[0, -3], [1, 2]])


def test_empty_file_gives_empty_table(tmp_path: Path) -> None:
    t = read_table(write_text(tmp_path / "e.csv", "# nothing\n"), kind="int", ncols=2)
    assert t.values.shape == (0, 2)


@pytest.mark.parametrize("text,line,what", [
    ("0,1\n2,x\n", 2, "not a number"),
    ("0,1\n2,3,4\n", 2, "exactly 2 fields"),
    ("0,1\n2\n", 2, "exactly 2 fields"),
    ("0,1\n1,,2\n", 2, "exactly 2 fields"),
    ("0,1\n\n1.5,2\n", 3, "non-integer"),
    ("0,99999999999999999999\n", 1, "beyond int64"),
    ("0,1\n2 3\n", 2, "not a number"),
])
def test_malformed_records_name_file_and_line(tmp_path: Path, text: str, line: int,
                                              what: str) -> None:
    path = write_text(tmp_path / "bad.csv", text)
    with pytest.raises(DataError, match=rf"bad\.csv line {line}: .*{what}"):
        read_table(path, kind="int")


def test_unknown_column_lists_the_columns(tmp_path: Path) -> None:
    t = read_table(write_text(tmp_path / "l.csv", "id,target\n0,1\n"), kind="int")
    with pytest.raises(DataError, match=r"label_column='label'.*columns are \['id', 'target'\]"):
        t.column("label", what="label_column")
    with pytest.raises(DataError, match=r"label_column=5: .* has 2 columns, allowed 0\.\.1"):
        t.column(5, what="label_column")


def test_read_rows_keeps_strings(tmp_path: Path) -> None:
    header, recs = read_rows(write_text(tmp_path / "t.csv", "id,mature\n3,True\n1,False\n"))
    assert header == ["id", "mature"] and recs == [["3", "True"], ["1", "False"]]


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope\.csv does not exist"):
        read_table(tmp_path / "nope.csv", kind="int")
    (tmp_path / "x.csv.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match=r"x\.csv\.gz: not a valid gzip file"):
        read_table(tmp_path / "x.csv.gz", kind="int")
