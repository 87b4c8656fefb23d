"""UBJSON (XGBoost's binary JSON, ``.ubj``) read in plain Python with bounds on everything:
nesting depth, container sizes against the bytes left, and types (a crafted file cannot make
it allocate more than its own length or recurse without end)."""

from __future__ import annotations

import numpy as np

from ..model_trust import ModelFileError

MAX_DEPTH = 64  # nesting of a UBJSON document (XGBoost's is about 6)


def _refuse(label: str, what: str) -> ModelFileError:
    return ModelFileError(f"{label} is not a valid model file: {what}. It may be damaged or crafted.")


_SCALARS = {
    ord("i"): (">i1", 1),
    ord("U"): (">u1", 1),
    ord("I"): (">i2", 2),
    ord("l"): (">i4", 4),
    ord("L"): (">i8", 8),
    ord("d"): (">f4", 4),
    ord("D"): (">f8", 8),
}


class _Ubj:
    """A bounded reader of the UBJSON XGBoost writes (typed and counted containers). Every
    declared count is checked against the bytes present before anything is allocated."""

    def __init__(self, data: bytes, label: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.label = label

    def fail(self, what: str) -> ModelFileError:
        return _refuse(self.label, f"{what} (UBJSON, at byte {self.pos:,})")

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"{n:,} bytes declared, {max(len(self.data) - self.pos, 0):,} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def marker(self) -> int:
        while True:
            m = self.take(1)[0]
            if m != ord("N"):  # no-op
                return m

    def number(self, m: int):
        if m not in _SCALARS:
            raise self.fail(f"unknown type marker {chr(m)!r}")
        dtype, size = _SCALARS[m]
        value = np.frombuffer(self.take(size), dtype=dtype)[0]
        return float(value) if dtype[1] == "f" else int(value)

    def length(self) -> int:
        n = self.number(self.marker())
        if not isinstance(n, int) or n < 0:
            raise self.fail(f"a negative or non-integer length ({n})")
        return n

    def string(self) -> str:
        raw = self.take(self.length())
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail("a string that is not UTF-8") from exc

    def value(self, m: int, depth: int = 0):
        if depth > MAX_DEPTH:
            raise self.fail(f"containers nested deeper than {MAX_DEPTH}")
        if m == ord("{"):
            return self.container(depth, is_object=True)
        if m == ord("["):
            return self.container(depth, is_object=False)
        if m == ord("S") or m == ord("H"):
            return self.string()
        if m == ord("C"):
            return chr(self.take(1)[0])
        if m == ord("Z"):
            return None
        if m == ord("T"):
            return True
        if m == ord("F"):
            return False
        return self.number(m)

    def container(self, depth: int, *, is_object: bool):
        typed = count = None
        if self.data[self.pos : self.pos + 1] == b"$":
            self.pos += 1
            typed = self.take(1)[0]
            if self.take(1)[0] != ord("#"):
                raise self.fail("a typed container without a count")
            count = self.length()
        elif self.data[self.pos : self.pos + 1] == b"#":
            self.pos += 1
            count = self.length()
        if not is_object and typed in _SCALARS and count is not None:
            dtype, size = _SCALARS[typed]
            return np.frombuffer(self.take(count * size), dtype=dtype)  # checked against the bytes left
        if count is not None and count > len(self.data) - self.pos:
            raise self.fail(f"{count:,} elements declared, {len(self.data) - self.pos:,} bytes left")
        items: list = []
        keys: list[str] = []
        i = 0
        while count is None or i < count:
            if count is None and self.data[self.pos : self.pos + 1] == (b"}" if is_object else b"]"):
                self.pos += 1
                break
            if is_object:
                keys.append(self.string())
            items.append(self.value(typed if typed is not None else self.marker(), depth + 1))
            i += 1
        return dict(zip(keys, items)) if is_object else items


def read_ubjson(data: bytes, label: str):
    reader = _Ubj(data, label)
    doc = reader.value(reader.marker())
    if reader.pos != len(data):
        raise reader.fail(f"{len(data) - reader.pos:,} bytes after the end of the document")
    return doc
