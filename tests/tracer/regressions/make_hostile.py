#!/usr/bin/env python3
"""Writes the hand-made hostile traces in this folder: a real header (from
fuzz/corpus/trace_reader/small.trace) followed by chunks with valid CRCs
whose contents lie (counts, lengths, times), so the normal reader build
decodes them instead of stopping at a checksum. Run from this folder."""
import struct
import zlib

seed = open("../../../fuzz/corpus/trace_reader/small.trace", "rb").read()
header_len = struct.unpack_from("<I", seed, 12)[0]
head = seed[: 20 + header_len]
start_ns = struct.unpack_from("<Q", seed, 20 + 4 * 5 + 8)[0]  # header: 5 u32, resolution, start


def chunk(kind, payload):
    frame = struct.pack("<II", kind, len(payload))
    return frame + struct.pack("<I", zlib.crc32(payload, zlib.crc32(frame))) + payload


def write(name, body):
    with open(name, "wb") as f:
        f.write(body)


STAGES, WORKERS, SNAPSHOT, SPANS, STEPS, GPU, PIPELINE = 1, 2, 3, 7, 8, 9, 10
write("hostile_snapshot_count.trace", head + chunk(SNAPSHOT, struct.pack("<QII", 1, 0xFFFFFFFF, 104)))
write("hostile_chunk_length.trace", head + struct.pack("<III", SNAPSHOT, 0xFFFFFFFF, 0) + b"\0" * 64)
write("hostile_string_length.trace", head + chunk(PIPELINE, struct.pack("<I", 0xFFFFFFF0) + b"x"))
write("hostile_stage_count.trace", head + chunk(STAGES, struct.pack("<I", 0xFFFFFFF0)))
write("hostile_gpu_name.trace",
      head + chunk(GPU, struct.pack("<IIIIIIQQQQ", 1, 48, 1, 0, 0, 0xFFFF, 1, 2, 3, 4)))
write("hostile_record_size.trace", head + chunk(SPANS, struct.pack("<II", 1, 8) + b"\0" * 8))
# Times at the ends of the range: before the start, and 2^63 after it.
span = struct.pack("<IIQQQ", 0, 0, 1, start_ns + (1 << 63), 0)
step = struct.pack("<IIQQQ", 0, 0, 0, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF)
snap = struct.pack("<QII", 0, 1, 104) + struct.pack("<IIII", 0, 1, 1, 0) + struct.pack("<Q", 0xFFFFFFFFFFFFFFFF) * 11
write("hostile_times.trace",
      head + chunk(STAGES, struct.pack("<IIII", 1, 0, 1, 1) + b"s" + struct.pack("<I", 0))
      + chunk(WORKERS, struct.pack("<IIIIIIQ", 1, 24, 0, 7, 0, 0, 0))
      + chunk(SNAPSHOT, snap) + chunk(SNAPSHOT, struct.pack("<QII", 1 << 63, 0, 104))
      + chunk(SPANS, struct.pack("<II", 1, 32) + span) + chunk(STEPS, struct.pack("<II", 1, 32) + step))
write("hostile_version_zero.trace", seed[:8] + struct.pack("<I", 0) + seed[12:])
write("hostile_empty.trace", b"")
