#!/usr/bin/env python3
"""Regenerates tests/fuzz/store_corpus: seed inputs for the TCPStore wire-parser fuzzer and
the malformed-message test. Valid requests of every command, streams of several, and the
classic malformations (truncated, lying lengths, over-limit counts, trailing bytes)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "store_corpus")

SET, GET, ADD, CAS, WAIT, CHECK, DELETE, NUMKEYS, APPEND, MGET, MSET, AUTH, PING = range(1, 14)


def frame(cmd, keys=(), values=(), integer=0, payload_len=None, trailer=b""):
    body = struct.pack("<q", integer) + struct.pack("<I", len(keys))
    for k in keys:
        body += struct.pack("<I", len(k)) + k
    body += struct.pack("<I", len(values))
    for v in values:
        body += struct.pack("<I", len(v)) + v
    body += trailer
    n = len(body) if payload_len is None else payload_len
    return bytes([cmd]) + struct.pack("<I", n) + body


seeds = {
    "set": frame(SET, [b"k"], [b"v"]),
    "set_binary": frame(SET, [b"bin"], [bytes(range(256))]),
    "set_empty": frame(SET, [b""], [b""]),
    "get": frame(GET, [b"k"], integer=1000),
    "get_zero_timeout": frame(GET, [b"missing"], integer=0),
    "get_negative_timeout": frame(GET, [b"k"], integer=-5),
    "add": frame(ADD, [b"ctr"], integer=7),
    "add_min": frame(ADD, [b"ctr"], integer=-(2**63)),
    "add_max": frame(ADD, [b"ctr"], integer=2**63 - 1),
    "cas": frame(CAS, [b"c"], [b"", b"new"]),
    "wait": frame(WAIT, [b"a", b"b"], integer=0),
    "check": frame(CHECK, [b"a", b"b", b"c"]),
    "delete": frame(DELETE, [b"k"]),
    "num_keys": frame(NUMKEYS),
    "append": frame(APPEND, [b"log"], [b"xyz"]),
    "multi_get": frame(MGET, [b"k", b"ctr"], integer=0),
    "multi_set": frame(MSET, [b"x", b"y"], [b"1", b"2"]),
    "auth": frame(AUTH, [], [b"\0" * 32]),
    "ping": frame(PING),
    "stream": frame(SET, [b"k"], [b"1"]) + frame(ADD, [b"k"], integer=2) + frame(GET, [b"k"])
              + frame(NUMKEYS),
    "stream_then_garbage": frame(SET, [b"k"], [b"v"]) + b"\xff" * 16,
    "unknown_command": frame(200, [b"k"]),
    "command_zero": frame(0),
    "set_wrong_shape": frame(SET, [b"a", b"b"], [b"v"]),
    "cas_one_value": frame(CAS, [b"c"], [b"x"]),
    "mset_mismatch": frame(MSET, [b"a", b"b"], [b"1"]),
    "auth_short_digest": frame(AUTH, [], [b"abc"]),
    "header_only": bytes([SET]) + struct.pack("<I", 100),
    "truncated_header": bytes([SET, 1, 0]),
    "truncated_set": frame(SET, [b"key"], [b"value"])[:-3],
    "huge_payload_len": bytes([SET]) + struct.pack("<I", 0xFFFFFFFF),
    "payload_just_over_limit": bytes([SET]) + struct.pack("<I", (128 << 20) + 1),
    "payload_too_short": frame(SET, payload_len=4)[:9],
    "key_count_huge": bytes([CHECK]) + struct.pack("<I", 12) + struct.pack("<q", 0)
                      + struct.pack("<I", 0xFFFFFFFF),
    "key_len_lies": bytes([SET]) + struct.pack("<I", 20) + struct.pack("<q", 0)
                    + struct.pack("<I", 1) + struct.pack("<I", 0x7FFFFFFF) + b"abcd",
    "key_over_limit": frame(SET, [b"k" * 4097], [b"v"]),
    "value_len_lies": bytes([SET]) + struct.pack("<I", 22) + struct.pack("<q", 0)
                      + struct.pack("<I", 1) + struct.pack("<I", 1) + b"k"
                      + struct.pack("<I", 1) + struct.pack("<I", 0xFFFFFFF0),
    "trailing_bytes": frame(SET, [b"k"], [b"v"], trailer=b"junk"),
    "value_count_missing": bytes([SET]) + struct.pack("<I", 17) + struct.pack("<q", 0)
                           + struct.pack("<I", 1) + struct.pack("<I", 1) + b"k",
    "many_empty_keys": frame(CHECK, [b""] * 1000),
    "zero_bytes": b"\0" * 64,
    "ff_bytes": b"\xff" * 64,
    "http_request": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
}

os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(seeds), OUT))
