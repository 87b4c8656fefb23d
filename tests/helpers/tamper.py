"""Altering a value kept in the broker (Redis), as an attacker with access to it would."""

from __future__ import annotations

import json

from dashboard import broker as broker_mod


def tamper(broker: broker_mod.Broker, name: str) -> None:
    """Flip one byte of the first chunk of a kept value, leaving its head as it was."""
    head = broker.client.get(f"{broker_mod.PREFIX}v:{name}")
    nonce = json.loads(head)["nonce"]
    key = f"{broker_mod.PREFIX}c:{name}:{nonce}:0"
    chunk = bytearray(broker.client.get(key))
    chunk[len(chunk) // 2] ^= 0x01
    broker.client.set(key, bytes(chunk))
