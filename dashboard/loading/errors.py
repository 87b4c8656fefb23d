"""The error every loading step raises, the operator's upload policy and small shared helpers."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from compute.errors import InputError

FIELDS = ("model", "data", "target", "output", "loss")


class LoadError(InputError):
    """An uploaded file (or the choice of target, output or loss) cannot be used.

    ``field`` is the page input the message belongs next to: one of :data:`FIELDS`.
    """

    def __init__(self, message: str, *, field: str) -> None:
        if field not in FIELDS:
            raise ValueError(f"LoadError field must be one of {FIELDS} (got {field!r}).")
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # picklable (background jobs), although ``field`` is keyword-only
        return functools.partial(type(self), field=self.field), (str(self),)


@dataclass(frozen=True)
class Policy:
    """What the operator lets users upload (command-line options of the server).

    ``max_bytes`` is the upload limit; a .skops archive may also unpack to at most that many
    bytes. skops writes uncompressed archives by default, so every such file within the
    upload limit passes; a compressed one may not unpack to more than an uncompressed one
    could hold.
    """

    allow_pickle: bool = False
    allow_user_types: bool = False
    max_bytes: int = 200 * 2**20
    max_rows: int = 1_000_000
    max_columns: int = 2_000


def file_suffix(path: str, name: str | None, known: tuple[str, ...]) -> str:
    """The suffix of ``path`` if it is a known one, else that of ``name``, else of ``path``."""
    from_path = os.path.splitext(path)[1].lower()
    if from_path in known or not name:
        return from_path
    from_name = os.path.splitext(name)[1].lower()
    return from_name if from_name in known else from_path


def check_size(path: str, label: str, policy: Policy, field: str) -> int:
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise LoadError(f"{label} could not be read; upload it again.", field=field) from exc
    if size == 0:
        raise LoadError(f"{label} is empty (0 bytes); upload the file again.", field=field)
    if size > policy.max_bytes:
        raise LoadError(
            f"{label} is {size / 2**20:.1f} MB; this server accepts files up to "
            f"{policy.max_bytes / 2**20:.0f} MB. Upload a sample of the rows or a smaller "
            f"file.",
            field=field,
        )
    return size


def short(exc: BaseException, limit: int = 300) -> str:
    """The first non-empty line of an exception's message, at most ``limit`` characters."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
