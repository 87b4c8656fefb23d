"""The data set the root address opens: the operator's (``python app.py --model ... --data ...
--target ...``) when one was given at start, else the X3 demo (the demos one click away).

The server decides it, never a visitor: ``app.py`` writes the workspace id into the cache
folder every worker reads (or removes it when started without a data set), and the page's
first state takes it when the address names no data set."""

from __future__ import annotations

import re

NAME = "start-workspace"  # the file, in the cache folder
_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


def set_start(ctx, ws_id: str | None) -> None:
    """Open ``ws_id`` at the root address from now on (None: the X3 demo again)."""
    path = ctx.store.path(NAME)
    if ws_id is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(NAME + ".tmp")
    tmp.write_text(ws_id)
    tmp.replace(path)


def start_ws(ctx) -> str | None:
    """The workspace the root address opens, if the operator gave one that still exists."""
    try:
        text = ctx.store.path(NAME).read_text().strip()
    except OSError:
        return None
    if not _ID.fullmatch(text) or ctx.store.workspace(text) is None:
        return None
    return text
