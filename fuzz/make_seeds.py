#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/ from the moq-lite-05 byte vectors of the spec
(moq-net/tests/data/moq-lite-05-vectors.json): each vector becomes a seed input of the
target whose decoder reads it, with the selector byte that target expects in front.
Run it again when the vectors change; the seeds are committed."""

import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "moq-net", "tests", "data", "moq-lite-05-vectors.json")

# control_messages: selector (first byte) per message, as in fuzz_targets/control_messages.rs.
CONTROL = {
    "SETUP": 0, "ANNOUNCE_REQUEST": 1, "ANNOUNCE_OK": 2, "ANNOUNCE": 3, "TRACK": 4,
    "TRACK_INFO": 5, "SUBSCRIBE": 6, "SUBSCRIBE_UPDATE": 7, "SUBSCRIBE_START": 8,
    "SUBSCRIBE_END": 8, "SUBSCRIBE_DROP": 8, "FETCH": 9, "GOAWAY": 10, "PROBE": 11,
}


def main():
    with open(VECTORS) as f:
        data = json.load(f)
    seeds = {}
    for group in ("vectors", "invalid", "decode_only"):
        for vector in data[group]:
            message, raw = vector["message"], bytes.fromhex(vector["hex"])
            if message in CONTROL:
                seeds.setdefault("control_messages", []).append(bytes([CONTROL[message]]) + raw)
            elif message == "STREAM_TYPE":
                selector = 12 if vector["stream"].startswith("bidi") else 13
                seeds.setdefault("control_messages", []).append(bytes([selector]) + raw)
            elif message in ("GROUP", "GROUP_STREAM", "FRAME", "FETCH_RESPONSE"):
                # chunk size byte 0 (one byte at a time) and 255 (whole)
                for chunk in (0, 255):
                    seeds.setdefault("group_stream", []).append(bytes([chunk]) + raw)
            elif message == "DATAGRAM":
                seeds.setdefault("datagram", []).append(raw)
            # Every vector is also a program for the whole-session target: open a uni
            # stream (SETUP first), then a stream of the vector's kind carrying its bytes.
            setup = bytes.fromhex("010100")
            program = bytes([0, 2, 0, len(setup)]) + setup
            kind = 1 if vector["stream"].startswith("bidi") else 0
            stream_type = int(vector["stream"].split()[1], 16) if " " in vector["stream"] else None
            body = (bytes([stream_type]) if stream_type is not None else b"") + raw
            program += bytes([kind, 2, 1, min(len(body), 255)]) + body[:255] + bytes([5, 100])
            seeds.setdefault("server_session", []).append(program)
    seeds["token"] = [
        b'{"root":"room","put":["alice"],"get":[""],"exp":1800003600}\x00/room/alice',
        b'{"root":"","put":"","get":"","exp":18446744073709551615,"nbf":0}\x00/',
        b"not.a.jwt\x00/room/../x?jwt=y",
    ]
    seeds["webtransport"] = [
        bytes([0]) + bytes.fromhex("4054") + bytes([4]),
        bytes([1]) + bytes.fromhex("4041") + bytes([4]),
        bytes([4, 255]) + bytes.fromhex("00") + bytes([8]) + bytes.fromhex("6843") + bytes([4, 0, 0, 0, 0]),
    ]
    out = os.path.join(HERE, "seeds")
    shutil.rmtree(out, ignore_errors=True)
    for target, inputs in seeds.items():
        os.makedirs(os.path.join(out, target))
        for i, raw in enumerate(inputs):
            with open(os.path.join(out, target, f"{i:03}"), "wb") as f:
                f.write(raw)
        print(f"{target}: {len(inputs)} seeds")


if __name__ == "__main__":
    main()
