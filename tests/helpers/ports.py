"""A loopback port nothing listens on (the OS picks it): for a server a test starts, or as
a closed port a client must fail to reach."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
