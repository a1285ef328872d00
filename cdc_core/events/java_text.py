"""Numbers as the JVM writes them: what Debezium's records hold, so Tidemark's do too."""

from __future__ import annotations

import decimal
import math


def java_double(x: float) -> str:
    """Java's `Double.toString` of a finite double (its shortest digits, which Python's
    repr has too): plain from 10^-3 to below 10^7, else `d.dddE<n>`."""
    if 1e-3 <= abs(x) < 1e7:
        return repr(x)  # plain there, with the same shortest digits and a `.0` when whole
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digit_tuple, exponent = decimal.Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    point = len(digit_tuple) + int(exponent) - 1  # the power of ten of the first digit
    text = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if point >= 0:
            whole = digits[: point + 1].ljust(point + 1, "0")
            return f"{text}{whole}.{digits[point + 1 :] or '0'}"
        return f"{text}0.{'0' * (-point - 1)}{digits}"
    return f"{text}{digits[0]}.{digits[1:] or '0'}E{point}"
