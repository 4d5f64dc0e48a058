"""dmlc RecordIO framing, as mx.recordio reads and writes it, streamed: no seek, so it works on Pipe-mode FIFOs.

One implementation for the data tool (which writes datasets) and the built-in programs (which read them).
Pure Python and struct only: importing it costs nothing and needs no MXNet.
"""

from __future__ import annotations

import struct

RECORDIO_MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", RECORDIO_MAGIC)
LENGTH_MASK = (1 << 29) - 1
# mx.recordio.IRHeader as MXNet packs it: flag, label, id, id2 (24 bytes).
IR_HEADER = struct.Struct("<IfQQ")


class RecordIOError(ValueError):
    """The bytes are not a complete RecordIO stream or record."""


class RecordIOWriter:
    """Writes records in the framing mx.recordio.MXRecordIO reads.

    Like dmlc's writer, a payload containing the magic word at a 4-byte aligned offset is split there into
    continuation parts (cflag 1/2/3) with the magic dropped; readers re-insert it. Without that, a reader
    would resynchronise on the payload bytes and corrupt the stream.
    """

    def __init__(self, fileobj):
        self._out = fileobj

    def write(self, payload: bytes) -> None:
        length = len(payload)
        if length > LENGTH_MASK:
            raise ValueError(f"record of {length} bytes is too large for RecordIO")
        part_start = 0
        for offset in range(0, length - length % 4, 4):
            if payload[offset:offset + 4] == MAGIC_BYTES:
                cflag = 1 if part_start == 0 else 2
                self._write_part(cflag, payload[part_start:offset])
                part_start = offset + 4
        self._write_part(3 if part_start else 0, payload[part_start:])
        padding = -length % 4
        if padding:
            self._out.write(b"\0" * padding)

    def _write_part(self, cflag: int, part: bytes) -> None:
        self._out.write(struct.pack("<II", RECORDIO_MAGIC, (cflag << 29) | len(part)))
        self._out.write(part)


def iter_records(stream):
    """Yields the payloads of a RecordIO stream, strictly sequentially; multi-part records are joined with
    the magic word re-inserted."""
    while True:
        head = _read_exact(stream, 8, allow_eof=True)
        if head is None:
            return
        record = bytearray()
        while True:
            magic, lrecord = struct.unpack("<II", head)
            if magic != RECORDIO_MAGIC:
                raise RecordIOError(f"not a RecordIO stream (bad magic 0x{magic:08x})")
            cflag, length = lrecord >> 29, lrecord & LENGTH_MASK
            data = _read_exact(stream, (length + 3) & ~3)
            record += data[:length]
            if cflag in (0, 3):
                break
            record += MAGIC_BYTES
            head = _read_exact(stream, 8)
        yield bytes(record)


def _read_exact(stream, size: int, allow_eof: bool = False) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        chunk = stream.read(size - len(buf))
        if not chunk:
            if allow_eof and not buf:
                return None
            raise RecordIOError("truncated RecordIO stream")
        buf += chunk
    return bytes(buf)


def pack_ir_record(label: float, index: int, payload: bytes) -> bytes:
    """mx.recordio.pack(IRHeader(0, label, index, 0), payload)."""
    return IR_HEADER.pack(0, float(label), index, 0) + payload


def unpack_ir_record(record: bytes) -> tuple[float, bytes]:
    """(label, payload) of an mx.recordio.pack()ed record; a label array (flag > 0) yields its first value."""
    if len(record) < IR_HEADER.size:
        raise RecordIOError(f"RecordIO record too short for an IRHeader ({len(record)} bytes)")
    flag, label, _, _ = IR_HEADER.unpack_from(record)
    payload = record[IR_HEADER.size:]
    if flag > 0:
        if len(payload) < 4 * flag:
            raise RecordIOError("RecordIO record label array truncated")
        label = struct.unpack_from("<f", payload)[0]
        payload = payload[4 * flag:]
    return label, payload
