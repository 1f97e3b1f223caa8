#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/ from the moq-lite-05 byte vectors of the spec
(moq-net/tests/data/moq-lite-05-vectors.json), and the -04, -03 and -06-wip vectors of
moq-net/tests/codec_versions.rs: each vector becomes a seed input of the target whose
decoder reads it, with the selector byte that target expects in front. Run it again when
the vectors change; the seeds are committed."""

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
    "TYPED_ANNOUNCE": 14,
}

# The version bits above a control_messages selector (<< 4), a group_stream chunk byte
# (<< 6) and the first byte of a datagram or server_session input, as the targets read them.
VERSION = {"05": 0, "04": 1, "03": 2, "06-wip": 3}

# Vectors of the other versions (moq-net/tests/codec_versions.rs): version, message, hex.
OTHER_VERSIONS = [
    ("04", "ANNOUNCE_REQUEST", "0b06726f6f6d2f61875bcd15"),
    ("03", "ANNOUNCE_REQUEST", "0706726f6f6d2f61"),
    ("06-wip", "ANNOUNCE_REQUEST", "0706726f6f6d2f61"),
    ("03", "ANNOUNCE", "080105616c69636503"),
    ("04", "ANNOUNCE", "130105616c6963650301412cc123456789abcdef"),
    ("06-wip", "TYPED_ANNOUNCE", "001305616c6963650301412cc123456789abcdef0c"),
    ("06-wip", "TYPED_ANNOUNCE", "01012a"),
    ("06-wip", "TYPED_ANNOUNCE", "02040301070c"),
    ("04", "SUBSCRIBE_START", "00050100000000"),
    ("03", "SUBSCRIBE_START", "0006070140fa0400"),
    ("04", "SUBSCRIBE_DROP", "0103030500"),
    ("03", "PROBE", "04800f4240"),
    ("04", "GROUP_STREAM", "02032a0568656c6c6f06776f726c642103616263"),
    ("03", "GROUP_STREAM", "02032a0568656c6c6f06776f726c642103616263"),
]

# (what to decode: 0 CLIENT_SETUP, 1 SERVER_SETUP, 2 a frame, 3 Key-Value-Pairs, 4 a
#  namespace, 5 message parameters, 6 GOAWAY, 7 MAX_REQUEST_ID, 8 REQUESTS_BLOCKED,
#  9 REQUEST_OK, 10 REQUEST_ERROR, 11 SUBSCRIBE_ERROR, 12 PUBLISH_NAMESPACE,
#  13 PUBLISH_NAMESPACE_DONE, 14 PUBLISH_NAMESPACE_CANCEL, 15 SUBSCRIBE_NAMESPACE,
#  16 SUBSCRIBE_TRACKS, 17 NAMESPACE, 18 SUBSCRIBE, 19 SUBSCRIBE_OK, 20 UNSUBSCRIBE,
#  21 PUBLISH, 22 PUBLISH_OK, 23 PUBLISH_DONE, 24 FETCH, 25 FETCH_OK, 26 FETCH_CANCEL,
#  27 TRACK_STATUS, 28 TRACK_STATUS_OK, 29 REQUEST_UPDATE, 30 PUBLISH_BLOCKED; draft: 0 = 14, 1 = 16, 2 = 18; hex)
MOQT = [
    (0, 0, "200014" "01c0000000ff00000e" "02" "01052f63686174" "024064"),
    (1, 0, "21000c" "c0000000ff00000e" "01024064"),
    (0, 1, "200015" "03" "01052f63686174" "014064" "05086d6f71782f302e31"),
    (0, 2, "af00001e" "01052f63686174" "040b6578616d706c652e636f6d" "02086d6f71782f302e31"),
    (1, 2, "af000000"),
    (2, 2, "c02f000000"),
    (3, 1, "02" "024064" "030161"),
    (4, 0, "0204726f6f6d05616c696365"),
    (5, 1, "04" "1001" "104080" "010102" "0101"),
    (5, 2, "04" "1001" "1080" "010102" "0101"),
    (6, 2, "100004" "00" "9388" "04"),
    (7, 0, "15000240c8"),
    (8, 1, "1a00010a"),
    (9, 1, "0700020200"),
    (10, 2, "050006" "3401000000" "00"),
    (11, 0, "05000502" "10" "026e6f"),
    (12, 2, "06000d" "00" "0104726f6f6d" "0103" "03746f6b"),
    (13, 0, "090006" "0104726f6f6d"),
    (14, 1, "0c0003" "021000"),
    (15, 1, "110004" "04000200"),
    (16, 2, "510008" "06" "0104726f6f6d" "00"),
    (17, 1, "080007" "0105616c696365"),
    (18, 0, "030011" "00" "0104726f6f6d" "0463686174" "80000102" "00"),
    (18, 1, "030015" "00" "0104726f6f6d" "0463686174" "03" "1001" "104080" "010102"),
    (18, 2, "030014" "00" "0104726f6f6d" "0463686174" "03" "1001" "1080" "010102"),
    (19, 0, "040008" "0007000101050200"),
    (19, 1, "040007" "0007" "0109020502"),
    (19, 2, "040007" "07" "01090502" "0e03"),
    (20, 1, "0a000102"),
    (21, 0, "1d0011" "01" "0104726f6f6d" "0463686174" "03" "01" "00" "01" "00"),
    (21, 2, "1d0012" "01" "0104726f6f6d" "0463686174" "03" "011001" "2201"),
    (22, 0, "1e0006" "0101800102" "00"),
    (22, 1, "1e000c" "01" "04" "1001" "104080" "010102" "0101"),
    (23, 1, "0b0004" "01020500"),
    (24, 0, "160014" "02" "8000" "01" "0104726f6f6d" "0463686174" "01000300" "00"),
    (24, 1, "160007" "04" "02" "0201" "01200a"),
    (24, 2, "160005" "04" "03" "0205" "00"),
    (25, 0, "180006" "02" "01" "00" "0300" "00"),
    (25, 2, "180004" "01" "0300" "00"),
    (26, 0, "17000102"),
    (27, 1, "0d000d" "02" "0104726f6f6d" "0463686174" "00"),
    (28, 0, "0e0008" "02" "00" "00" "01" "01" "0401" "00"),
    (29, 0, "020008" "02" "00" "0500" "08" "0a" "00" "00"),
    (29, 2, "020004" "02" "011000"),
    (30, 2, "0f000c" "0105616c696365" "0463686174"),
]

# (0 a subgroup stream, 1 a datagram, 2 / 3 a fetch stream's items, ascending /
#  descending; draft: 0 = 14, 1 = 16, 2 = 18; hex)
MOQT_DATA = [
    (0, 0, "10030580" "000268690003"),
    (0, 1, "3d030502" "000005" "68656c6c6f" "02023e01026869" "00000003"),
    (0, 2, "7d030502" "000005" "68656c6c6f"),
    (1, 0, "0403058068 69".replace(" ", "")),
    (1, 1, "09030507023c026869"),
    (1, 2, "2403050104"),
    (1, 0, "2003050001" "04"),
    (2, 0, "010000800002" "6869"),
    (2, 1, "1c0100800268 69" "0003616263" "405c03004001" "7a" "408c0502".replace(" ", "")),
    (2, 2, "1c0100800268 69" "0003616263" "5c0100400178" "808c0102".replace(" ", "")),
    (3, 2, "1f0500010178" "010e010078"),
]


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
                # chunk size byte 0 (one byte at a time) and 63 (64 at a time), -05
                for chunk in (0, 63):
                    seeds.setdefault("group_stream", []).append(bytes([chunk]) + raw)
            elif message == "DATAGRAM":
                # The first byte: the version, -05 and -06-wip (the versions with datagrams).
                for version in ("05", "06-wip"):
                    seeds.setdefault("datagram", []).append(bytes([VERSION[version]]) + raw)
            # Every vector is also a program for the whole-session target: open a uni
            # stream (SETUP first), then a stream of the vector's kind carrying its bytes.
            setup = bytes.fromhex("010100")
            program = bytes([0, 2, 0, len(setup)]) + setup
            kind = 1 if vector["stream"].startswith("bidi") else 0
            stream_type = int(vector["stream"].split()[1], 16) if " " in vector["stream"] else None
            body = (bytes([stream_type]) if stream_type is not None else b"") + raw
            program += bytes([kind, 2, 1, min(len(body), 255)]) + body[:255] + bytes([5, 100])
            # The first byte: the session's version, -05.
            seeds.setdefault("server_session", []).append(bytes([0]) + program)
    for version, message, text in OTHER_VERSIONS:
        raw, bits = bytes.fromhex(text), VERSION[version]
        if message == "GROUP_STREAM":
            for chunk in (0, 63):
                seeds["group_stream"].append(bytes([bits << 6 | chunk]) + raw)
        else:
            seeds["control_messages"].append(bytes([bits << 4 | CONTROL[message]]) + raw)
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
    # moq-transport, from the byte vectors written from each draft's text
    # (moq-net/src/moqt/vectors.rs). The first byte: what to decode << 2 | the draft
    # (0: 14, 1: 16, 2: 18).
    seeds["moqt_control"] = [bytes([kind << 2 | draft]) + bytes.fromhex(text) for kind, draft, text in MOQT]
    # moq-transport data (moq-net/src/moqt/data_vectors.rs). The first byte: 0 a subgroup
    # stream, 1 a datagram, 2 a fetch stream ascending, 3 descending, << 2 | the draft.
    seeds["moqt_data"] = [bytes([kind << 2 | draft]) + bytes.fromhex(text) for kind, draft, text in MOQT_DATA]
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
