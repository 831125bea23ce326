"""A text file read a piece of whole lines at a time, its lines as a pyarrow column: what the file readers take.

``file_pieces`` and ``pieces_of`` cut a file (or its bytes) into pieces of about ``size`` bytes
that end just after a line break, so no line, and no UTF-8 character, is split between two.
``split_lines`` turns a piece into a column of its lines, split where ``open(..., newline="")``
splits them (``\\n``, ``\\r\\n`` and a lone ``\\r``) or at ``\\n`` alone; text that is not UTF-8
raises the ``UnicodeDecodeError`` Python's decoder raises, its position counted from the file's start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["SIZE", "decoded", "file_pieces", "pieces_of", "split_lines"]

SIZE = 8 << 20
"""Bytes of a file a piece holds (at least; a piece ends with a whole line)."""


def _cut(data: bytes | bytearray, final: bool) -> int:
    """Return where a piece of ``data`` ends: just after its last line break that cannot be half of ``\\r\\n``."""
    if final:
        return len(data)
    at = data.rfind(b"\n")
    if at >= 0:
        return at + 1
    at = data.rfind(b"\r", 0, len(data) - 1)  # a last "\r" may be followed by the "\n" of the next read
    return at + 1


def file_pieces(fh: BinaryIO, start: int = 0, size: int | None = None) -> Iterator[tuple[bytes, int]]:
    """Yield (piece, byte offset of the piece after ``start``) of a binary file from byte ``start`` to its end."""
    size = size or SIZE
    fh.seek(start)
    held = bytearray()
    offset = 0
    while True:
        more = fh.read(size)
        held += more
        cut = _cut(held, final=not more)
        if cut:
            yield bytes(held[:cut]), offset
            offset += cut
            del held[:cut]
        if not more:
            return


def pieces_of(data: bytes, size: int | None = None) -> Iterator[tuple[bytes, int]]:
    """Yield (piece, byte offset) of bytes already in memory, as ``file_pieces`` cuts a file."""
    size = size or SIZE
    offset = 0
    while offset < len(data):
        window = data[offset : offset + size]
        cut = _cut(window, final=offset + size >= len(data))
        while not cut:  # a line longer than a piece: take more of it
            window = data[offset : offset + len(window) + size]
            cut = _cut(window, final=offset + len(window) >= len(data))
        yield window[:cut], offset
        offset += cut


def decoded(piece: bytes, offset: int) -> str:
    """Return a piece as text; UnicodeDecodeError naming the byte counted from the start of the file."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnicodeDecodeError(exc.encoding, exc.object, exc.start + offset, exc.end + offset, exc.reason) from None


def split_lines(piece: bytes, offset: int, *, universal: bool = True) -> pa.StringArray:
    """Return the lines of a piece (without their line breaks); a break at its very end starts no line.

    ``universal``: a line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r``; otherwise at ``\\n`` only.
    """
    whole = pa.Array.from_buffers(
        pa.binary(), 1, [None, pa.py_buffer(np.array([0, len(piece)], np.int32)), pa.py_buffer(piece)]
    )
    try:
        text = whole.cast(pa.string())  # checks the UTF-8 in C
    except pa.ArrowInvalid:
        decoded(piece, offset)  # raises, saying where
        raise
    if universal and b"\r" in piece:
        text = pc.replace_substring(pc.replace_substring(text, "\r\n", "\n"), "\r", "\n")
    lines = pc.split_pattern(text, "\n").values
    ends = piece.endswith(b"\n") or (universal and piece.endswith(b"\r"))
    return lines.slice(0, len(lines) - 1) if ends else lines
