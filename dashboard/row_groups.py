"""Data sets in row groups, so a part of a split job reads only its own rows (issue 44).

The store writes every data set as Parquet in row groups of :data:`ROW_GROUP_ROWS` rows.
With a broker (machines that share nothing but it), a data set travels as its row groups:
each is a Parquet file of its own, kept in the broker under its own signed name
(:func:`group_name`), beside a manifest of how many rows each group holds
(:func:`manifest_name`). A worker computing rows ``[a, b)`` fetches only the groups covering
them (:func:`covering`), checked against their signatures, and keeps them in its local
folder; a process that needs the whole data set fetches every group and assembles the file
(:func:`assemble`). Nothing here names a task: :meth:`dashboard.store.Store.rows` reads a
row range, and a task spec that declares ``reads_rows`` asks for nothing more.
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
    """``frame`` as Parquet in row groups of :data:`ROW_GROUP_ROWS` rows."""
    frame.to_parquet(path, row_group_size=ROW_GROUP_ROWS)


def sizes(path) -> list[int]:
    """Rows of each row group of a Parquet file (from its footer alone)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def manifest_name(rel: str) -> str:
    return f"f:{rel}.groups"


def group_name(rel: str, g: int) -> str:
    return f"f:{rel}.g{int(g)}"


def local_group(root: Path, rel: str, g: int) -> Path:
    """Where a fetched row group is kept in a machine's folder (beside the data set's own
    name: the store's purge keeps it while a workspace uses the data set)."""
    return root / f"{rel}.g{int(g)}"


def manifest_bytes(path) -> bytes:
    return json.dumps(sizes(path)).encode()


def read_manifest(blob: bytes | None) -> list[int] | None:
    """The rows per group a manifest lists, None when absent or not a list of counts."""
    if blob is None:
        return None
    try:
        found = json.loads(blob)
    except ValueError:
        return None
    if not isinstance(found, list) or not all(isinstance(n, int) and n >= 0 for n in found):
        return None
    return found


def group_bytes(path, g: int) -> bytes:
    """Row group ``g`` of a Parquet file as a Parquet file of its own (the pandas schema kept)."""
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pq.ParquetFile(path).read_row_group(g), out)
    return out.getvalue()


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


def assemble(blobs: list[bytes], path) -> None:
    """The whole data set from its row groups in order, written as one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(io.BytesIO(blob)) for blob in blobs]
    pq.write_table(pa.concat_tables(tables), path, row_group_size=ROW_GROUP_ROWS)


# --- through a store and its broker ------------------------------------------------------------
def publish(store, rel: str) -> None:
    """Keep a stored data set in the broker as its row groups, then its manifest (once: the
    manifest is written last, so one found means every group is there)."""
    if store.remote.exists(manifest_name(rel)):
        return
    local = store.root / rel
    for g in range(len(sizes(local))):
        store.remote.put(group_name(rel, g), group_bytes(local, g))
    store.remote.put(manifest_name(rel), manifest_bytes(local))


def _group(store, rel: str, g: int) -> Path:
    """Row group ``g`` of a data set in this machine's folder, fetched from the broker first."""
    path = local_group(store.root, rel, g)
    if not path.exists():
        blob = store.remote_read(group_name(rel, g))
        if blob is None:
            raise LookupError(f"Row group {g} of the data set could not be fetched from the broker; run it again.")
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        tmp.write_bytes(blob)
        tmp.replace(path)
    return path


def fetch_whole(store, rel: str, local: Path) -> bool:
    """Assemble a data set this machine has not seen from its row groups in the broker;
    False when the broker holds no manifest of it (a file published whole, before row groups)."""
    counts = read_manifest(store.remote_read(manifest_name(rel)))
    if counts is None:
        return False
    tables_from = [_group(store, rel, g) for g in range(len(counts))]
    tmp = local.with_name(f".{local.name}.{secrets.token_hex(6)}.tmp")
    assemble([p.read_bytes() for p in tables_from], tmp)
    tmp.replace(local)
    for p in tables_from:  # the whole file holds them now
        p.unlink(missing_ok=True)
    return True


def read_rows(store, rel: str, rows: tuple[int, int], columns: list[str] | None) -> pd.DataFrame:
    """Rows ``[a, b)`` of a stored data set, only ``columns``, reading only the row groups
    holding them: from this machine's copy of the file when it has one, else those groups
    alone from the broker."""
    a, b = rows
    local = store.root / rel
    counts = None
    if store.remote is not None and not local.exists():
        counts = read_manifest(store.remote_read(manifest_name(rel)))
    if counts is None:  # the file here (fetched whole when published before row groups)
        path = store.path(rel)
        groups, skip = covering(sizes(path), a, b)
        return frame_of(read_groups(path, groups, columns), skip, b - a)
    groups, skip = covering(counts, a, b)
    return frame_of([read_groups(_group(store, rel, g), [0], columns)[0] for g in groups], skip, b - a)
