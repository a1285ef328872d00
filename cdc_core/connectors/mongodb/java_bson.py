"""How the MongoDB Java driver reads what pymongo cannot say the same way: text that is
not UTF-8, Decimal128 values, regular expression options.

Debezium decodes each change with the Java driver (`BsonBinaryReader` into a
`BsonDocument`) before writing its JSON, so these follow its source (mongo-java-driver
5.6, `org.bson`), and the JDK's (`java.lang.String` decoding UTF-8). The compiled
transcoder (`transcoder/src/java.rs`) does the same, byte for byte.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def java_utf8(data: bytes) -> str:
    """`new String(data, UTF_8)`, which the Java driver decodes every BSON string and
    field name with: each malformed sequence becomes one U+FFFD, grouped as the JDK
    groups them (a surrogate written in UTF-8, `ED A0 80`, is one, where Python's
    decoder makes three; a truncated sequence at the end is one and ends the text)."""
    out: list[str] = []
    n = len(data)
    sp = 0
    while sp < n:
        b1 = data[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if sp < n:
                b2 = data[sp]
                if b2 & 0xC0 != 0x80:
                    out.append(REPLACEMENT)  # b2 is read again
                else:
                    out.append(chr((b1 & 0x1F) << 6 | b2 & 0x3F))
                    sp += 1
                continue
            out.append(REPLACEMENT)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if sp + 1 < n:
                b2, b3 = data[sp], data[sp + 1]
                first_bad = (b1 == 0xE0 and b2 & 0xE0 == 0x80) or b2 & 0xC0 != 0x80
                if first_bad or b3 & 0xC0 != 0x80:
                    out.append(REPLACEMENT)
                    sp += 0 if first_bad else 1
                else:
                    c = (b1 & 0x0F) << 12 | (b2 & 0x3F) << 6 | b3 & 0x3F
                    out.append(REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                    sp += 2
                continue
            if sp < n and ((b1 == 0xE0 and data[sp] & 0xE0 == 0x80) or data[sp] & 0xC0 != 0x80):
                out.append(REPLACEMENT)
                continue
            out.append(REPLACEMENT)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if sp + 2 < n:
                b2, b3, b4 = data[sp], data[sp + 1], data[sp + 2]
                c = (b1 & 0x07) << 18 | (b2 & 0x3F) << 12 | (b3 & 0x3F) << 6 | b4 & 0x3F
                if b2 & 0xC0 != 0x80 or b3 & 0xC0 != 0x80 or b4 & 0xC0 != 0x80 or not 0x10000 <= c < 0x110000:
                    out.append(REPLACEMENT)
                    if _bad_second_of_four(b1, b2):
                        pass
                    elif b3 & 0xC0 != 0x80:
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(c))
                    sp += 3
                continue
            if b1 > 0xF4 or (sp < n and _bad_second_of_four(b1, data[sp])):
                out.append(REPLACEMENT)
                continue
            sp += 1
            out.append(REPLACEMENT)
            if sp < n and data[sp] & 0xC0 != 0x80:
                continue
            break
        else:
            out.append(REPLACEMENT)
    return "".join(out)


def _bad_second_of_four(b1: int, b2: int) -> bool:
    return (
        b1 > 0xF4
        or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
        or (b1 == 0xF4 and b2 & 0xF0 != 0x80)
        or b2 & 0xC0 != 0x80
    )


def text_of(data: bytes) -> str:
    """A BSON string's or name's bytes as the Java driver reads them."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return java_utf8(data)


_SIGN = 1 << 63
_INFINITY = 0x78 << 56
_NAN = 0x7C << 56
_TWO_HIGH = 3 << 61


def decimal128_text(value: bytes) -> str:
    """Java's `Decimal128.toString` of the 16 bytes of a BSON Decimal128: `NaN`,
    `Infinity`, `-Infinity`; else the coefficient as digits, plain when the exponent is
    at most 0 and the adjusted exponent at least -6, else `d.dddE+n`; a negative zero
    keeps its sign (`-0`, `-0E+3`). A coefficient past 10^34 - 1 (non-canonical) is
    written as it is, as Java does, not as zero."""
    low = int.from_bytes(value[:8], "little")
    high = int.from_bytes(value[8:16], "little")
    if high & _NAN == _NAN:
        return "NaN"
    if high & _INFINITY == _INFINITY:
        return "-Infinity" if high & _SIGN else "Infinity"
    if high & _TWO_HIGH == _TWO_HIGH:
        exponent = ((high & 0x1FFFE00000000000) >> 47) - 6176
        coefficient = 0
    else:
        exponent = ((high & 0x7FFF800000000000) >> 49) - 6176
        coefficient = (high & 0x0001FFFFFFFFFFFF) << 64 | low
    digits = str(coefficient)
    text = "-" if high & _SIGN else ""
    adjusted = exponent + len(digits) - 1
    if exponent <= 0 and adjusted >= -6:
        if exponent == 0:
            return text + digits
        pad = -exponent - len(digits)
        if pad >= 0:
            return f"{text}0.{'0' * pad}{digits}"
        return f"{text}{digits[:-pad]}.{digits[-pad:]}"
    text += digits[0]
    if len(digits) > 1:
        text += "." + digits[1:]
    return f"{text}E{'+' if adjusted > 0 else ''}{adjusted}"


def regex_options(options: str) -> str:
    """`BsonRegularExpression` keeps its options sorted. (Java sorts UTF-16 units, which
    orders characters past U+FFFF differently; MongoDB accepts only `imxslu`.)"""
    return "".join(sorted(options))
