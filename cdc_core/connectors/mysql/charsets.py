"""MySQL's character sets as Python codecs, for text that comes as the column's bytes (a
binlog row image, a VStream row).

Most MySQL charset names are Python codec names or aliases that read the same bytes, but
not all: MySQL's latin1 is Windows-1252, UTF-16, UTF-32 and UCS-2 are big-endian (Python's
`utf16`/`utf32` read little-endian without a byte-order mark), and `ucs2`, `utf16le`,
`macce`, `koi8r` and the `utf8*` names are not Python's. Charsets with no Python codec
(dec8, swe7, hp8, keybcs2, armscii8, geostd8) keep their name: decoding them fails aloud.
"""

from __future__ import annotations

_CODECS = {
    "utf8": "utf-8",
    "utf8mb3": "utf-8",
    "utf8mb4": "utf-8",
    "latin1": "cp1252",
    "utf16": "utf-16-be",
    "utf32": "utf-32-be",
    "ucs2": "utf-16-be",
    "utf16le": "utf-16-le",
    "macce": "mac-latin2",
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "binary": "latin-1",
}


def python_codec(charset: str | None) -> str:
    """The Python codec that reads text stored in MySQL `charset` (None: UTF-8)."""
    if charset is None:
        return "utf-8"
    return _CODECS.get(charset.lower(), charset)
