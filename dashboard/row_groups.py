"""Data sets in row groups, so a part of a split job reads only its own rows (issue 44), and
a column chunk at a time, so a task reads only its own columns.

The store writes every data set as Parquet in row groups of :data:`ROW_GROUP_ROWS` rows.
With a broker (machines that share nothing but it), a data set travels as its column
chunks: each column of each row group is an Arrow IPC file of its own (LZ4-compressed
buffers: read from memory in microseconds, where a Parquet file of one column takes a
millisecond to open), kept in the broker under its own signed name (:func:`chunk_name`),
beside the file's Arrow schema with its pandas metadata (:func:`schema_name`) and, written
last, a manifest of how many rows each group holds and the columns in schema order
(:func:`manifest_name`). A worker computing rows ``[a, b)`` of some columns fetches only
those columns' chunks in the groups covering them (:func:`covering`), all it lacks in a few
round trips (:data:`FETCH_BATCH` a time), checked against their signatures, and keeps them
in its local folder (:func:`local_chunk`); one column over every row is every chunk of that
column and no other. A process that needs the whole data set fetches every chunk and
assembles the file (:func:`fetch_whole`). Nothing here names a task:
:meth:`dashboard.store.Store.rows` reads rows and columns, and a task spec that declares
``reads_rows`` asks for nothing more.
"""

from __future__ import annotations

import io
import json
import secrets
from pathlib import Path

import pandas as pd

#: Rows per row group of a stored data set: a part of the all-rows prediction pass is one
#: group, and its result (one float64 per row and output column) stays about 1 MB or less
#: (65,536 x 2 x 8 bytes for a binary classifier's probabilities)
ROW_GROUP_ROWS = 65_536


def write(frame: pd.DataFrame, path) -> None:
    """``frame`` as Parquet in row groups of :data:`ROW_GROUP_ROWS` rows, as
    ``frame.to_parquet`` writes it (its types and pandas metadata from the whole frame), but
    converted to Arrow a row group at a time: the memory it takes beyond the frame is one
    group's, not a second copy of the data set."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pa.Schema.from_pandas(frame)  # the whole frame's types, index and metadata
        with pq.ParquetWriter(path, schema, use_dictionary=dictionary_columns(schema)) as out:
            for a in range(0, max(len(frame), 1), ROW_GROUP_ROWS):
                group = pa.Table.from_pandas(frame.iloc[a : a + ROW_GROUP_ROWS], schema=schema)
                out.write_table(group.replace_schema_metadata(schema.metadata), row_group_size=ROW_GROUP_ROWS)
    except (KeyError, TypeError, ValueError, pa.ArrowException):  # labels Arrow renames (numbers): pandas' way
        frame.to_parquet(path, row_group_size=ROW_GROUP_ROWS)
    _give_back()


def dictionary_columns(schema) -> list[str]:
    """The columns Parquet writes dictionary-encoded: all but decimal numbers. Those rarely
    repeat, and trying a dictionary first (the default) makes writing one 10x slower
    (0.48 s against 4.6 s at 1,000,000 x 100 float32)."""
    import pyarrow as pa

    return [f.name for f in schema if not pa.types.is_floating(f.type)]


def read_frame(path) -> pd.DataFrame:
    """A stored data set as ``pd.read_parquet`` reads it (the same frame: types, index,
    column labels), read and converted a column at a time: the memory it takes at its peak
    is the frame's and one column's, where reading the whole table first takes the table,
    the frame and the allocator's cache of both (3.5x the frame, measured at 1,000,000 x 100
    float32). The frame keeps a block per column (pandas consolidates none of them)."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    meta = handle.schema_arrow.pandas_metadata or {}
    stored_index = {c for c in meta.get("index_columns", []) if isinstance(c, str)}  # a range index: no column
    names = [n for n in handle.schema_arrow.names if n not in stored_index]
    if not names:
        return pd.read_parquet(path)
    parts: list[pd.DataFrame] = []
    for name in names:
        part = handle.read(columns=[name], use_pandas_metadata=not parts).to_pandas(self_destruct=True)
        if parts:
            part.index = parts[0].index  # the index, read with the first column alone
        parts.append(part)
    frame = pd.concat(parts, axis=1)
    del parts
    _give_back()
    return frame


_FRAMES: dict[str, pd.DataFrame] = {}


def cached_frame(path: str, sha: str) -> pd.DataFrame:
    """A stored data set by content hash (:func:`read_frame`): a small per-process cache of
    immutable, shared data (not per-user state: the same content gives the same frame for
    every session)."""
    frame = _FRAMES.get(sha)
    if frame is None:
        frame = read_frame(path)
        if len(_FRAMES) >= 8:
            _FRAMES.pop(next(iter(_FRAMES)))
        _FRAMES[sha] = frame
    return frame


def _give_back() -> None:
    """Return the memory Arrow's allocator keeps cached after a conversion to the system
    (mimalloc holds freed pages for reuse: gigabytes after a large data set)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def sizes(path) -> list[int]:
    """Rows of each row group of a Parquet file (from its footer alone)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


#: Column chunks a machine asks the broker for at once (two round trips to Redis for all):
#: 64 chunks of 65,536 float32 values are 16 MiB
FETCH_BATCH = 64


def manifest_name(rel: str) -> str:
    """The manifest of a data set kept as Arrow column chunks (a name of its own: the
    manifests former versions wrote, of whole row groups (``.groups``) and of Parquet
    column chunks (``.chunks``), are never read as one)."""
    return f"f:{rel}.arrow-chunks"


def schema_name(rel: str) -> str:
    return f"f:{rel}.schema"


def chunk_name(rel: str, g: int, k: int) -> str:
    """Column ``k`` (its position in the schema) of row group ``g``, as an Arrow file."""
    return f"f:{rel}.g{int(g)}.a{int(k)}"


def local_chunk(root: Path, rel: str, g: int, k: int) -> Path:
    """Where a fetched column chunk is kept in a machine's folder (beside the data set's own
    name: the store's purge keeps it while a workspace uses the data set)."""
    return root / f"{rel}.g{int(g)}.a{int(k)}"


def manifest_bytes(path) -> bytes:
    import pyarrow.parquet as pq

    return json.dumps({"rows": sizes(path), "columns": pq.ParquetFile(path).schema_arrow.names}).encode()


def read_manifest(blob: bytes | None) -> tuple[list[int], list[str]] | None:
    """The rows per group and the column names a manifest lists, None when absent or not
    such lists."""
    if blob is None:
        return None
    try:
        found = json.loads(blob)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    counts, names = found.get("rows"), found.get("columns")
    if not isinstance(counts, list) or not all(isinstance(n, int) and n >= 0 for n in counts):
        return None
    if not isinstance(names, list) or not all(isinstance(c, str) for c in names):
        return None
    return counts, names


def schema_bytes(path) -> bytes:
    """The Arrow schema of a Parquet file, its pandas metadata included."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).schema_arrow.serialize().to_pybytes()


def chunks(path):
    """``(g, k, bytes)`` for every column ``k`` of every row group ``g`` of a Parquet file,
    each chunk an Arrow IPC file of that column alone, its buffers LZ4-compressed (its type
    kept in its schema; the pandas metadata travels once, in :func:`schema_bytes`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    options = pa.ipc.IpcWriteOptions(compression="lz4")
    handle = pq.ParquetFile(path)
    for g in range(handle.metadata.num_row_groups):
        table = handle.read_row_group(g)  # every column, pandas index columns included
        for k in range(table.num_columns):
            column = table.select([k]).replace_schema_metadata(None)
            out = pa.BufferOutputStream()
            with pa.ipc.new_file(out, column.schema, options=options) as writer:
                writer.write_table(column)
            yield g, k, out.getvalue().to_pybytes()


def covering(counts: list[int], a: int, b: int) -> tuple[list[int], int]:
    """The row groups holding rows ``[a, b)`` and the position of row ``a`` in the first."""
    if not 0 <= a <= b <= sum(counts):
        raise ValueError(f"rows {a}..{b} are outside a data set of {sum(counts)} rows")
    groups: list[int] = []
    start, skip = 0, 0
    for g, n in enumerate(counts):
        if start < b and start + n > a:
            if not groups:
                skip = a - start
            groups.append(g)
        start += n
    return groups, skip


def read_groups(source, groups: list[int], columns: list[str] | None) -> list:
    """Row groups of one Parquet file (a path or bytes) as Arrow tables, only ``columns``."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    return [handle.read_row_group(g, columns=columns) for g in groups]


def frame_of(tables: list, skip: int, n: int) -> pd.DataFrame:
    """The ``n`` rows from position ``skip`` of the tables in order, as pandas reads them."""
    import pyarrow as pa

    table = pa.concat_tables(tables) if len(tables) != 1 else tables[0]
    return table.slice(skip, n).to_pandas().reset_index(drop=True)


def wanted(names: list[str], columns: list[str] | None) -> list[int]:
    """Positions of ``columns`` in the schema, as Parquet reads them: in the order asked,
    once each, names the file lacks passed over; every column when None."""
    if columns is None:
        return list(range(len(names)))
    return [names.index(c) for c in dict.fromkeys(columns) if c in names]


# --- through a store and its broker ------------------------------------------------------------
def publish(store, rel: str) -> None:
    """Keep a stored data set in the broker as its column chunks, its schema, then its
    manifest (once: the manifest is written last, so one found means every chunk is there)."""
    if store.remote.exists(manifest_name(rel)):
        return
    local = store.root / rel
    for g, k, blob in chunks(local):
        store.remote.put(chunk_name(rel, g, k), blob)
    store.remote.put(schema_name(rel), schema_bytes(local))
    store.remote.put(manifest_name(rel), manifest_bytes(local))


def _schema(store, rel: str, names: list[str]):
    """The data set's Arrow schema from the broker, checked against its manifest."""
    import pyarrow as pa

    blob = store.remote_read(schema_name(rel))
    try:
        schema = None if blob is None else pa.ipc.read_schema(pa.py_buffer(blob))
    except (pa.ArrowException, ValueError):
        schema = None
    if schema is None or schema.names != names:
        raise LookupError("The schema of the data set could not be fetched from the broker; run it again.")
    return schema


def _fetch(store, rel: str, wanted_chunks: list[tuple[int, int]], names: list[str]) -> None:
    """The chunks ``(g, k)`` this machine's folder lacks, fetched from the broker
    :data:`FETCH_BATCH` at a time and kept there; one the broker does not give is named."""
    lacking = [(g, k) for g, k in wanted_chunks if not local_chunk(store.root, rel, g, k).exists()]
    for start in range(0, len(lacking), FETCH_BATCH):
        batch = lacking[start : start + FETCH_BATCH]
        blobs = store.remote_read_many([chunk_name(rel, g, k) for g, k in batch])
        for (g, k), blob in zip(batch, blobs):
            if blob is None:
                raise LookupError(
                    f"Row group {g} (column {names[k]!r}) of the data set could not be fetched from the broker; "
                    "run it again."
                )
            path = local_chunk(store.root, rel, g, k)
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
            tmp.write_bytes(blob)
            tmp.replace(path)


def _group_table(store, rel: str, g: int, ks: list[int], layout: tuple):
    """Columns ``ks`` of row group ``g`` as one Arrow table of the data set's schema (its
    pandas metadata kept), from their chunks; a chunk not of its group's rows and the
    schema's type is refused."""
    import pyarrow as pa

    counts, schema = layout
    fields, arrays = [schema.field(k) for k in ks], []
    for k, field in zip(ks, fields):
        try:
            blob = local_chunk(store.root, rel, g, k).read_bytes()  # fetched by :func:`_fetch`
            column = pa.ipc.open_file(pa.BufferReader(blob)).read_all().column(0)
        except (OSError, pa.ArrowException, IndexError) as exc:
            raise LookupError(f"Row group {g} (column {field.name!r}) of the data set is not readable.") from exc
        if len(column) != counts[g] or column.type != field.type:
            raise LookupError(f"Row group {g} (column {field.name!r}) of the data set is not as its manifest says.")
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=schema.metadata))


def fetch_whole(store, rel: str, local: Path) -> bool:
    """Assemble a data set this machine has not seen from its column chunks in the broker
    (groups in order, columns as the schema orders them); False when the broker holds no
    manifest of it (a file published whole)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    found = read_manifest(store.remote_read(manifest_name(rel)))
    if found is None:
        return False
    counts, names = found
    schema = _schema(store, rel, names)
    every = list(range(len(names)))
    _fetch(store, rel, [(g, k) for g in range(len(counts)) for k in every], names)
    tables = [_group_table(store, rel, g, every, (counts, schema)) for g in range(len(counts))]
    tmp = local.with_name(f".{local.name}.{secrets.token_hex(6)}.tmp")
    whole = pa.concat_tables(tables) if tables else schema.empty_table()
    pq.write_table(whole, tmp, row_group_size=ROW_GROUP_ROWS, use_dictionary=dictionary_columns(schema))
    tmp.replace(local)
    for g in range(len(counts)):  # the whole file holds them now
        for k in every:
            local_chunk(store.root, rel, g, k).unlink(missing_ok=True)
    return True


def read_rows(store, rel: str, rows: tuple[int, int], columns: list[str] | None) -> pd.DataFrame:
    """Rows ``[a, b)`` of a stored data set, only ``columns``, reading only the row groups
    holding them: from this machine's copy of the file when it has one, else those groups'
    chunks of those columns alone from the broker."""
    a, b = rows
    local = store.root / rel
    found = None
    if store.remote is not None and not local.exists():
        found = read_manifest(store.remote_read(manifest_name(rel)))
    if found is None:  # the file here (fetched whole when published whole)
        path = store.path(rel)
        groups, skip = covering(sizes(path), a, b)
        return frame_of(read_groups(path, groups, columns), skip, b - a)
    counts, names = found
    layout = (counts, _schema(store, rel, names))
    groups, skip = covering(counts, a, b)
    ks = wanted(names, columns)
    _fetch(store, rel, [(g, k) for g in groups for k in ks], names)
    return frame_of([_group_table(store, rel, g, ks, layout) for g in groups], skip, b - a)
