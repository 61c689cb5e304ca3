#!/usr/bin/env python3
"""Copies a GGUF file with metadata pairs set, retyped or removed, for tests
that need a file the writers of baton would not produce (format: ggml's
docs/gguf.md; shares no code with src/model/gguf.c).

usage: gguf_edit.py IN OUT [--set KEY TYPE VALUE]... [--del KEY]...
                           [--rename-tensor OLD NEW]...

TYPE is str, u32, i32, u64, f32 or bool. KEY, a str VALUE and tensor names
take Python escapes (\\x1b, \\xc2\\x9b, \\n, ...) and become those bytes, so
a test can put control bytes into them. A key that is set keeps its place; a new one
is appended. The tensor infos and data are copied unchanged (their offsets
are relative to the data section, which is padded again to the file's
alignment).
"""
import codecs
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
TYPES = {"u32": (4, "<I"), "i32": (5, "<i"), "u64": (10, "<Q"), "f32": (6, "<f"),
         "bool": (7, "<B")}


def read_string(data, at):
    (n,) = struct.unpack_from("<Q", data, at)
    return data[at + 8:at + 8 + n], at + 8 + n


def skip_value(data, at, typ):
    if typ == STRING:
        return read_string(data, at)[1]
    if typ == ARRAY:
        et, count = struct.unpack_from("<IQ", data, at)
        at += 12
        for _ in range(count):
            at = skip_value(data, at, et)
        return at
    return at + SIZES[typ]


def encode(key, typ, value):
    out = struct.pack("<Q", len(key)) + key
    if typ == "str":
        raw = unescape(value)
        return out + struct.pack("<IQ", STRING, len(raw)) + raw
    code, fmt = TYPES[typ]
    num = float(value) if typ == "f32" else int(value, 0)
    return out + struct.pack("<I", code) + struct.pack(fmt, num)


def unescape(arg):
    return codecs.escape_decode(arg.encode())[0]


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        sys.exit(__doc__.strip())
    src, dst, args = argv[1], argv[2], argv[3:]
    sets, dels, renames = {}, set(), {}
    while args:
        if args[0] == "--set":
            sets[unescape(args[1])] = (args[2], args[3])
            args = args[4:]
        elif args[0] == "--del":
            dels.add(unescape(args[1]))
            args = args[2:]
        elif args[0] == "--rename-tensor":
            renames[unescape(args[1])] = unescape(args[2])
            args = args[3:]
        else:
            sys.exit("gguf_edit.py: unknown argument " + args[0])
    data = open(src, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF", "not a GGUF file"
    at, pairs, align = 24, [], 32
    for _ in range(n_kv):
        start = at
        key, at = read_string(data, at)
        (typ,) = struct.unpack_from("<I", data, at)
        end = skip_value(data, at + 4, typ)
        if key == b"general.alignment":
            (align,) = struct.unpack_from("<I", data, at + 4)
        pairs.append((key, data[start:end]))
        at = end
    infos = b""
    for _ in range(n_tensors):
        name, at2 = read_string(data, at)
        (n_dims,) = struct.unpack_from("<I", data, at2)
        end = at2 + 4 + 8 * n_dims + 4 + 8
        infos += struct.pack("<Q", len(renames.get(name, name))) + renames.get(name, name)
        infos += data[at2:end]
        at = end
    data_start = at + (-at % align)
    kvs = []
    for key, raw in pairs:
        if key in dels:
            continue
        kvs.append(encode(key, *sets.pop(key)) if key in sets else raw)
    for key, (typ, value) in sets.items():
        kvs.append(encode(key, typ, value))
    out = struct.pack("<4sIQQ", magic, version, n_tensors, len(kvs)) + b"".join(kvs) + infos
    out += b"\0" * (-len(out) % align)
    open(dst, "wb").write(out + (data[data_start:] if n_tensors else b""))


if __name__ == "__main__":
    main(sys.argv)
