"""A log whose header reads but whose samples do not: bytes flipped inside one sample record of
an ``.eval`` log (a zip), as a bad disk, a bad copy or a store that drops mid-read leaves it."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path


def corrupt_sample(log: Path) -> str:
    """Flip bytes in the middle of the compressed data of ``log``'s first sample record, in
    place; returns the record's name. The header (``header.json``) is untouched, so Inspect
    reads the log's header and fails on its samples."""
    with zipfile.ZipFile(log) as z:
        info = next(i for i in z.infolist() if i.filename.startswith("samples/"))
    data = bytearray(log.read_bytes())
    # the local file header: 30 bytes, then the name and the extra field, then the data
    at = info.header_offset
    name_len, extra_len = struct.unpack("<HH", data[at + 26 : at + 30])
    start = at + 30 + name_len + extra_len
    middle = start + info.compress_size // 2
    for i in range(middle, min(middle + 8, start + info.compress_size)):
        data[i] ^= 0xFF
    log.write_bytes(bytes(data))
    return info.filename
