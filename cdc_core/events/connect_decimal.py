"""Kafka Connect's Decimal value: the unscaled integer as big-endian two's complement
bytes, base64 in JSON. Connectors encode it, the Delta merge decodes it; both sides do
exact arithmetic, as MySQL's DECIMAL has up to 65 digits and Python's default context
rounds to 28."""

from __future__ import annotations

import base64
import decimal

EXACT = decimal.Context(prec=100)


def encode_decimal(value: decimal.Decimal, scale: int) -> str:
    unscaled = int(value.scaleb(scale, EXACT).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def decode_decimal(text: str | None, scale: int) -> decimal.Decimal | None:
    if text is None:
        return None
    unscaled = int.from_bytes(base64.b64decode(text), "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-scale, EXACT)
