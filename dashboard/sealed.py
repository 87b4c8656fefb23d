"""Results as stored: pickled with a SHA-256 of the bytes in front, checked before use."""

from __future__ import annotations

import hashlib
import pickle

_MAGIC = b"WIP1"
_CORRUPT = object()


def seal(value) -> bytes:
    """Pickle a result with a SHA-256 of the bytes in front (checked by :func:`unseal`)."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _MAGIC + hashlib.sha256(payload).digest() + payload


def sealed_intact(blob) -> bool:
    """Whether a sealed blob is whole (its checksum holds), without unpickling it."""
    if not isinstance(blob, (bytes, bytearray)) or len(blob) < 36 or blob[:4] != _MAGIC:
        return False
    return hashlib.sha256(memoryview(blob)[36:]).digest() == blob[4:36]


def unseal(blob):
    """The value of a sealed blob, or ``_CORRUPT`` when it is truncated or altered.

    Only blobs our own workers wrote reach ``pickle.loads`` (the cache folder is private to
    the server, and the checksum rejects partial or damaged writes)."""
    if not isinstance(blob, (bytes, bytearray)) or len(blob) < 36 or blob[:4] != _MAGIC:
        return _CORRUPT
    digest, payload = blob[4:36], blob[36:]
    if hashlib.sha256(payload).digest() != digest:
        return _CORRUPT
    try:
        return pickle.loads(payload)
    except Exception:
        return _CORRUPT
