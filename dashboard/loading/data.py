"""Data files: .csv (UTF-8, comma-separated, a header line) and .parquet, parsed after size,
encoding and header checks."""

from __future__ import annotations

import codecs
import csv
import glob
import os
import re

import pandas as pd

from .errors import LoadError, Policy, check_size, file_suffix, short

DATA_SUFFIXES = (".csv", ".parquet", ".pq")
PARQUET_EXPANSION = 4  # a Parquet file may expand to at most 4 x the upload limit in memory


def read_data(path, *, name: str | None = None, policy: Policy = Policy()) -> pd.DataFrame:
    """Parse an uploaded .csv (UTF-8, comma-separated, header line) or .parquet file.

    The frame's ``attrs["name"]`` is set to the user's file name (used in later messages).
    """
    path = os.fspath(path)
    label = name or os.path.basename(path)
    if os.path.isdir(path) or glob.has_magic(path):  # a Parquet data set: a folder of files, or a glob
        frame = _read_parquet_set(path, label, policy)
        _check_frame(frame, label, policy)
        frame.attrs["name"] = label
        return frame
    suffix = file_suffix(path, name, DATA_SUFFIXES)
    if suffix not in DATA_SUFFIXES:
        raise LoadError(
            f"{label}: a data file must end in {', '.join(DATA_SUFFIXES)} (got {suffix or 'no suffix'}).", field="data"
        )
    check_size(path, label, policy, "data")
    frame = _read_csv(path, label, policy) if suffix == ".csv" else _read_parquet(path, label, policy)
    _check_frame(frame, label, policy)
    frame.attrs["name"] = label
    return frame


def _read_csv(path: str, label: str, policy: Policy) -> pd.DataFrame:
    with open(path, "rb") as fh:
        head = fh.read(64 * 1024)
    kind = (
        "an Excel workbook (.xlsx)"
        if head.startswith(b"PK\x03\x04")
        else "an old Excel workbook (.xls)"
        if head.startswith(b"\xd0\xcf\x11\xe0")
        else "a binary file (it contains NUL bytes; UTF-16 text does too)"
        if b"\x00" in head
        else None
    )
    if kind:
        raise LoadError(
            f"{label} looks like {kind}, not a CSV file; export it as CSV (UTF-8), e.g. "
            f"in Excel with File > Save As > 'CSV UTF-8'.",
            field="data",
        )
    _check_utf8(path, label)
    with open(path, encoding="utf-8-sig", newline="") as fh:
        try:
            header = next((row for row in csv.reader(fh) if row), None)
        except csv.Error as exc:
            raise LoadError(f"{label}: the header line cannot be read as CSV ({exc}).", field="data") from exc
    if header is None:
        raise LoadError(f"{label} has no header line; the first line must name the columns.", field="data")
    _check_names(header, label, policy)
    try:
        frame = pd.read_csv(
            path, encoding="utf-8-sig", engine="c", on_bad_lines="error", nrows=policy.max_rows + 1, low_memory=False
        )
    except pd.errors.ParserError as exc:
        found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if found:
            expected, line, saw = found.groups()
            raise LoadError(
                f"{label}: line {line} has {saw} fields but the header has {expected}. "
                f'Check for an unquoted comma in a value (quote it: "a, b") or a '
                f"missing header name.",
                field="data",
            ) from exc
        raise LoadError(f"{label} cannot be parsed as CSV ({short(exc)}).", field="data") from exc
    except (pd.errors.EmptyDataError, ValueError) as exc:
        raise LoadError(f"{label} cannot be parsed as CSV ({short(exc)}).", field="data") from exc
    return frame


def _check_utf8(path: str, label: str) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = lines = 0
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            pending = len(decoder.getstate()[0])  # bytes of an unfinished character
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                pos = offset - pending + exc.start
                line = lines + chunk[: max(exc.start - pending, 0)].count(b"\n") + 1
                raise LoadError(
                    f"{label} is not UTF-8 text: byte {pos} (0x{exc.object[exc.start]:02x}, "
                    f"line {line}) is invalid. Re-save the file as CSV UTF-8 (in Excel: "
                    f"'CSV UTF-8'; in pandas: to_csv(..., encoding='utf-8')).",
                    field="data",
                ) from exc
            if not chunk:
                return
            offset += len(chunk)
            lines += chunk.count(b"\n")


def _read_parquet(path: str, label: str, policy: Policy) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise LoadError(f"{label} is not a valid Parquet file ({short(exc)}).", field="data") from exc
    try:
        schema = pf.schema_arrow
        if pf.metadata.num_rows > policy.max_rows:
            raise LoadError(
                f"{label} has {pf.metadata.num_rows:,} rows; this server accepts at most "
                f"{policy.max_rows:,} (its --max-rows). Upload a sample of the rows.",
                field="data",
            )
        _check_names(list(schema.names), label, policy)
        nested = [f.name for f in schema if pa.types.is_nested(f.type)]
        if nested:
            raise LoadError(
                f"{label} has nested (list/struct/map) columns {nested[:10]}; flatten them into plain columns.",
                field="data",
            )
        expanded, allowed = _parquet_in_memory(pf), PARQUET_EXPANSION * policy.max_bytes
        if expanded > allowed:
            raise LoadError(
                f"{label} would take about {expanded / 2**20:,.0f} MiB once decompressed, more "
                f"than this server reads from one file ({allowed / 2**20:,.0f} MiB, "
                f"{PARQUET_EXPANSION} x the upload limit). Upload fewer rows or columns.",
                field="data",
            )
        try:
            return pf.read().to_pandas()
        except Exception as exc:
            if isinstance(exc, MemoryError) or "malloc" in str(exc):
                raise LoadError(
                    f"{label} needs more memory to read than this server allows per file; "
                    f"upload fewer rows or columns.",
                    field="data",
                ) from exc
            raise LoadError(f"{label} could not be read as Parquet ({short(exc)}).", field="data") from exc
    finally:
        pf.close()


def parquet_set_files(path: str) -> list[str]:
    """The files of a Parquet data set: every ``.parquet``/``.pq`` file under a folder (as
    Spark, Dask and pyarrow write them, partition folders included; hidden and ``_`` files
    such as ``_SUCCESS`` left out), or those a glob matches, in name order."""
    if os.path.isdir(path):
        found = [
            os.path.join(root, f)
            for root, dirs, files in os.walk(path)
            for f in files
            if not f.startswith((".", "_")) and f.lower().endswith((".parquet", ".pq"))
        ]
    else:
        found = [f for f in glob.glob(path, recursive=True) if os.path.isfile(f)]
    return sorted(found)


def _read_parquet_set(path: str, label: str, policy: Policy) -> pd.DataFrame:
    """A Parquet data set read as one frame: every file must hold the same columns with the
    same types (a column with no values at all, typed null, fits any type); a file that does
    not is refused, naming it and the column. Rows, columns and the memory the set takes once
    read are bounded as for one file, over all its files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = parquet_set_files(path)
    if not files:
        raise LoadError(f"{label}: no .parquet files found there.", field="data")
    first, rows, expanded, tables = None, 0, 0, []
    for file in files:
        name = os.path.relpath(file, path) if os.path.isdir(path) else os.path.basename(file)
        try:
            pf = pq.ParquetFile(file)
        except Exception as exc:
            raise LoadError(f"{label}: {name} is not a valid Parquet file ({short(exc)}).", field="data") from exc
        try:
            schema = pf.schema_arrow
            if first is None:
                first = (name, schema)
                _check_names(list(schema.names), label, policy)
            else:
                _same_columns(label, first, (name, schema))
            rows += pf.metadata.num_rows
            expanded += _parquet_in_memory(pf)
            if rows > policy.max_rows or expanded > PARQUET_EXPANSION * policy.max_bytes:
                raise LoadError(
                    f"{label} holds more than this server reads ({policy.max_rows:,} rows: --max-rows, "
                    f"{PARQUET_EXPANSION * policy.max_bytes / 2**20:,.0f} MiB in memory: 4 x --upload-limit-mb) "
                    f"by {name}; "
                    "give fewer files, or a sample of the rows.",
                    field="data",
                )
            tables.append(pf.read())
        finally:
            pf.close()
    assert first is not None
    try:
        table = pa.concat_tables([t.select(first[1].names) for t in tables], promote_options="permissive")
        return table.to_pandas()
    except Exception as exc:
        raise LoadError(f"{label} could not be read as one table ({short(exc)}).", field="data") from exc


def _same_columns(label: str, first: tuple, other: tuple) -> None:
    """Refuse a file of a data set whose columns or types differ from the first file's."""

    (name0, schema0), (name, schema) = first, other
    missing = [c for c in schema0.names if c not in schema.names]
    extra = [c for c in schema.names if c not in schema0.names]
    if missing or extra:
        said = f"lacks column {missing[0]!r}" if missing else f"has column {extra[0]!r}, which {name0} lacks"
        raise LoadError(f"{label}: {name} {said}; every file of a data set needs the same columns.", field="data")
    for column in schema0.names:
        a, b = _kind(schema0.field(column).type), _kind(schema.field(column).type)
        if a != b and "no values" not in (a, b):
            raise LoadError(
                f"{label}: column {column!r} holds {b} in {name} but {a} in {name0}; every file of a "
                "data set needs the same types.",
                field="data",
            )


def _kind(t) -> str:
    """A column type in words, as a data set's files must agree on it (whole and decimal
    numbers agree: pandas writes a column with a missing value as decimals)."""
    import pyarrow as pa

    checks = (
        (pa.types.is_null, "no values"),
        (pa.types.is_boolean, "true/false values"),
        (lambda t: pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t), "numbers"),
        (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "text"),
        (pa.types.is_dictionary, "categories"),
        (pa.types.is_temporal, "dates or times"),
    )
    return next((word for check, word in checks if check(t)), str(t))


def _parquet_in_memory(pf) -> int:
    """Bytes the table takes once read: 8 per value (numbers, offsets, dictionary codes) plus
    the uncompressed size of text and binary columns, from the file's metadata alone."""
    import pyarrow as pa

    meta = pf.metadata
    total = meta.num_rows * meta.num_columns * 8
    text = {
        j
        for j, f in enumerate(pf.schema_arrow)
        if pa.types.is_string(f.type)
        or pa.types.is_binary(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_large_binary(f.type)
    }
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        total += sum(group.column(j).total_uncompressed_size for j in range(group.num_columns) if j in text)
    return int(total)


def _check_names(names: list, label: str, policy: Policy) -> None:
    if len(names) > policy.max_columns:
        raise LoadError(
            f"{label} has {len(names)} columns; this server accepts at most "
            f"{policy.max_columns}. Keep the model's input columns and the target.",
            field="data",
        )
    blank = [j + 1 for j, n in enumerate(names) if not str(n).strip() or re.fullmatch(r"Unnamed: \d+", str(n))]
    if blank:
        raise LoadError(
            f"{label}: column(s) {blank[:10]} have no name in the header. Name every "
            f"column; a leading unnamed column is usually a row index saved by pandas "
            f"(save with to_csv(..., index=False)).",
            field="data",
        )
    counts = pd.Series([str(n) for n in names]).value_counts()
    duplicated = counts[counts > 1].index.tolist()
    if duplicated:
        raise LoadError(
            f"{label} has duplicated column names {duplicated[:10]}; each column needs its own name.", field="data"
        )


def _check_frame(frame: pd.DataFrame, label: str, policy: Policy) -> None:
    if len(frame) == 0:
        raise LoadError(f"{label} has a header but no data rows.", field="data")
    if len(frame) > policy.max_rows:
        raise LoadError(
            f"{label} has more than {policy.max_rows:,} rows, the most this server accepts (its --max-rows); "
            "upload a sample of the rows.",
            field="data",
        )
    _check_names(list(frame.columns), label, policy)
    # a column with no values (all missing) is kept: a model that reads missing values predicts
    # with it; the load refuses it, naming it, only for a model that cannot (loading/checks.py)
