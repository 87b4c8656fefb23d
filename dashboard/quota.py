"""Upload quotas shared by every worker: per-client rate and bytes, a global disk budget.

A client is its remote address (behind ``--trusted-proxies`` reverse proxies, the address
they forward). Each client's recent uploads live in a small disk cache in the cache folder,
read and updated in one transaction, so two gunicorn workers (or machines sharing the
folder) count the same uploads.
"""

from __future__ import annotations

import ipaddress
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .store import ForkSafeCache

WRITING = ".writing"  # marker file of an upload still being received: never evicted
WINDOW_RATE = 60.0  # seconds: the upload-rate window
WINDOW_BYTES = 3600.0  # seconds: the bytes-per-client window


def client_key(address: str | None) -> str:
    """Whom a quota counts for: the IPv4 address, or the /64 network of an IPv6 address (one
    subscriber's prefix: a client can pick any address in it)."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return "unknown"
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str = ""
    retry_after: int = 0


class UploadQuota:
    def __init__(self, root: Path, *, per_minute: int, bytes_per_hour: int, disk_budget: int):
        self.root = Path(root)
        self.per_minute, self.bytes_per_hour, self.disk_budget = per_minute, bytes_per_hour, disk_budget
        self.cache = ForkSafeCache(str(self.root / "quota"), size_limit=64 * 2**20)

    def admit(self, client: str, size: int, now: float | None = None) -> Verdict:
        """Whether ``client`` may upload ``size`` more bytes now; if so the upload is counted."""
        now = time.time() if now is None else now
        key = f"client:{client}"
        with self.cache.transact(retry=True):
            events = [(t, b) for t, b in (self.cache.get(key, default=[]) or []) if now - t < WINDOW_BYTES]
            recent = [t for t, _ in events if now - t < WINDOW_RATE]
            if len(recent) >= self.per_minute:
                wait = int(WINDOW_RATE - (now - min(recent))) + 1
                return Verdict(
                    False,
                    f"Too many uploads from your address: at most {self.per_minute} per minute. Try again in {wait} s.",
                    wait,
                )
            used = sum(b for _, b in events)
            if used + size > self.bytes_per_hour:
                wait = int(WINDOW_BYTES - (now - min(t for t, _ in events))) + 1 if events else int(WINDOW_BYTES)
                return Verdict(
                    False,
                    f"Your address has uploaded {used / 2**20:,.0f} MiB in the last hour; this "
                    f"server accepts {self.bytes_per_hour / 2**20:,.0f} MiB per hour. Try again "
                    f"in {wait // 60 + 1} min.",
                    wait,
                )
            events.append((now, int(size)))
            self.cache.set(key, events, expire=WINDOW_BYTES)
        return Verdict(True)

    def enforce_disk_budget(self, uploads: Path, keep: Path) -> Verdict:
        """Delete the oldest upload folders (never ``keep``) until the uploads fit the budget.
        Loaded files were copied out of the upload folder, so evicting one costs a user at
        most a re-upload of a file not loaded yet."""
        folders = []
        for folder in uploads.iterdir():
            try:
                files = list(folder.iterdir())
                size = sum(f.stat().st_size for f in files)
                writing = any(f.name == WRITING for f in files)
                folders.append((folder.stat().st_mtime, folder, size, writing))
            except (FileNotFoundError, NotADirectoryError):
                continue
        total = sum(size for _, _, size, _ in folders)
        for _, folder, size, writing in sorted(folders, key=lambda item: item[0]):
            if total <= self.disk_budget:
                break
            if folder == keep or writing:  # another request is still receiving this one
                continue
            shutil.rmtree(folder, ignore_errors=True)
            total -= size
        if total > self.disk_budget:
            return Verdict(
                False, "The server's space for uploads is full; try again later or upload a smaller file.", 60
            )
        return Verdict(True)
