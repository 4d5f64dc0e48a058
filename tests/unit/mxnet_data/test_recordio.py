"""recordio: the framing round-trips, including payloads holding the magic word (checked against MXNet's own
reader and writer in tests/programs/test_synth_data.py, inside the image)."""

import io
import struct

import pytest
from sagemaker_mxnet_data import recordio
from sagemaker_mxnet_data.recordio import MAGIC_BYTES, RecordIOError

PAYLOADS = [b"", b"abc", MAGIC_BYTES, MAGIC_BYTES + b"tail", b"1234" + MAGIC_BYTES + b"5678" + MAGIC_BYTES + b"9",
            b"12" + MAGIC_BYTES + b"34", bytes(range(256)) * 3 + MAGIC_BYTES]


def write(payloads) -> bytes:
    out = io.BytesIO()
    writer = recordio.RecordIOWriter(out)
    for payload in payloads:
        writer.write(payload)
    return out.getvalue()


def test_round_trip_with_magic_words_inside_payloads():
    data = write(PAYLOADS)
    assert len(data) % 4 == 0
    assert list(recordio.iter_records(io.BytesIO(data))) == PAYLOADS


def test_an_aligned_magic_word_splits_the_record_and_an_unaligned_one_does_not():
    split = write([b"1234" + MAGIC_BYTES + b"5678"])
    assert split.count(MAGIC_BYTES) == 2  # two part headers, the payload's own magic dropped
    assert struct.unpack_from("<I", split, 4)[0] >> 29 == 1  # first part
    whole = write([b"12" + MAGIC_BYTES + b"34"])
    assert struct.unpack_from("<I", whole, 4)[0] >> 29 == 0


def test_reads_a_stream_in_small_pieces_as_a_fifo_delivers_it():
    class Trickle(io.RawIOBase):
        def __init__(self, data):
            self.data = data

        def read(self, size=-1):
            take = 3 if size < 0 else min(3, size)
            chunk, self.data = self.data[:take], self.data[take:]
            return chunk

    assert list(recordio.iter_records(Trickle(write(PAYLOADS)))) == PAYLOADS


@pytest.mark.parametrize("data, message", [
    (struct.pack("<II", 0x12345678, 4) + b"abcd", "bad magic 0x12345678"),
    (struct.pack("<II", 0xCED7230A, 100) + b"short", "truncated"),
    (struct.pack("<II", 0xCED7230A, 1 << 29) + b"", "truncated"),  # a first part with no continuation
    (MAGIC_BYTES[:3], "truncated"),
])
def test_broken_streams_are_errors(data, message):
    with pytest.raises(RecordIOError, match=message):
        list(recordio.iter_records(io.BytesIO(data)))


def test_ir_records():
    packed = recordio.pack_ir_record(7, 12, b"pixels")
    assert len(packed) == 24 + 6
    assert recordio.unpack_ir_record(packed) == (7.0, b"pixels")
    with_label_array = struct.pack("<IfQQ", 2, 0.0, 5, 0) + struct.pack("<ff", 3.0, 1.0) + b"xyz"
    assert recordio.unpack_ir_record(with_label_array) == (3.0, b"xyz")
    with pytest.raises(RecordIOError, match="too short"):
        recordio.unpack_ir_record(b"\0" * 10)
    with pytest.raises(RecordIOError, match="label array truncated"):
        recordio.unpack_ir_record(struct.pack("<IfQQ", 4, 0.0, 5, 0) + b"\0" * 8)
