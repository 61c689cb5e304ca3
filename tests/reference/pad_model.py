#!/usr/bin/env python3
"""Widens an F32 llama GGUF with zeros so that every matrix row holds a
multiple of 256 elements (K-quant super-blocks), keeping what it computes
(issue 18: "stories260K zero-padded to width 256").

  pad_model.py IN.gguf OUT.gguf WIDTH FF

WIDTH (a multiple of the head size, >= n_embd) is the new n_embd, FF (>=
n_ff) the new n_ff. The head size stays: n_head and n_head_kv grow by
WIDTH / n_embd (so query head h still reads kv head h / group, the
grouped-query map). Every matrix keeps its values in its first rows and
columns; the new ones are zero:
  - the embedding and the residual stream get WIDTH - n_embd zero lanes, and
    every matrix that writes the stream (attn_output, ffn_down) has zero rows
    there, so they stay zero;
  - the new heads have zero Q, K, V rows: their V is zero, so they add
    nothing through attn_output;
  - the new feed-forward lanes have zero gate and up rows: silu(0) * 0 = 0;
  - RMS norm now divides by the root mean square over WIDTH lanes, which is
    sqrt(n_embd / WIDTH) times the old one when the new lanes are zero: the
    norm weights are multiplied by that factor (exact for WIDTH / n_embd = 4,
    a power of 4) and epsilon by n_embd / WIDTH, so the normalized values are
    the same numbers (up to rounding).
The tokenizer and every other key are copied. Only F32 tensors (a
llama2.c-converted model such as stories260K); GGUF v2/v3 as written by
llama.cpp. Deterministic: the same input gives the same bytes.
"""
import math
import struct
import sys

ALIGN_DEFAULT = 32
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, n):
        if n > len(self.d) - self.o:
            raise ValueError("truncated GGUF")
        b = self.d[self.o:self.o + n]
        self.o += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64()).decode("utf-8")

    def value_raw(self, t):
        """The raw bytes of one value of type t."""
        start = self.o
        if t in SIZES:
            self.take(SIZES[t])
        elif t == 8:
            self.take(self.u64())
        elif t == 9:
            et, n = self.u32(), self.u64()
            for _ in range(n):
                self.value_raw(et)
        else:
            raise ValueError("unknown GGUF value type %d" % t)
        return self.d[start:self.o]


def pstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def main():
    src, dst, width, ff = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(src, "rb") as f:
        r = Reader(f.read())
    if r.take(4) != b"GGUF":
        raise SystemExit("%s: not a GGUF file" % src)
    version = r.u32()
    n_tensors, n_kv = r.u64(), r.u64()
    kvs = []
    for _ in range(n_kv):
        key = r.string()
        t = r.u32()
        kvs.append([key, t, r.value_raw(t)])
    kv = {k: (t, raw) for k, t, raw in kvs}

    def u32_of(key):
        t, raw = kv[key]
        return struct.unpack("<I", raw)[0]

    align = u32_of("general.alignment") if "general.alignment" in kv else ALIGN_DEFAULT
    n_embd, n_ff = u32_of("llama.embedding_length"), u32_of("llama.feed_forward_length")
    n_head, n_head_kv = u32_of("llama.attention.head_count"), u32_of("llama.attention.head_count_kv")
    eps = struct.unpack("<f", kv["llama.attention.layer_norm_rms_epsilon"][1])[0]
    hd = n_embd // n_head
    if width < n_embd or width % n_embd or ff < n_ff:
        raise SystemExit("WIDTH must be a multiple of n_embd %d, FF >= n_ff %d" % (n_embd, n_ff))
    grow = width // n_embd
    new = {"llama.embedding_length": struct.pack("<I", width),
           "llama.feed_forward_length": struct.pack("<I", ff),
           "llama.attention.head_count": struct.pack("<I", n_head * grow),
           "llama.attention.head_count_kv": struct.pack("<I", n_head_kv * grow),
           "llama.attention.layer_norm_rms_epsilon": struct.pack("<f", eps * n_embd / width)}
    for item in kvs:
        if item[0] in new:
            item[2] = new[item[0]]
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.u32()
        dims = [r.u64() for _ in range(nd)]
        t, off = r.u32(), r.u64()
        if t != 0:
            raise SystemExit("%s: tensor %s is not F32" % (src, name))
        infos.append((name, dims, off))
    base = (r.o + align - 1) // align * align
    data = r.d

    def new_dim(name, i, d):
        """The padded extent of dimension i (extent d) of tensor name."""
        if d == n_embd:
            return width
        if d == n_ff and ("ffn_" in name):
            return ff
        if d == n_head_kv * hd and (name.endswith("attn_k.weight") or name.endswith("attn_v.weight")):
            return n_head_kv * hd * grow
        return d

    scale = math.sqrt(n_embd / width)
    out_tensors = []
    for name, dims, off in infos:
        n = 1
        for d in dims:
            n *= d
        vals = struct.unpack_from("<%df" % n, data, base + off)
        nd = [new_dim(name, i, d) for i, d in enumerate(dims)]
        if len(dims) == 1:
            v = list(vals) + [0.0] * (nd[0] - dims[0])
            if name.endswith("norm.weight"):
                v = [x * scale for x in v]
            buf = struct.pack("<%df" % nd[0], *v)
        elif len(dims) == 2:
            rows = []
            for j in range(nd[1]):
                if j < dims[1]:
                    row = list(vals[j * dims[0]:(j + 1) * dims[0]]) + [0.0] * (nd[0] - dims[0])
                else:
                    row = [0.0] * nd[0]
                rows.extend(row)
            buf = struct.pack("<%df" % len(rows), *rows)
        else:
            raise SystemExit("%s: tensor %s has %d dimensions" % (src, name, len(dims)))
        out_tensors.append((name, nd, buf))
    head = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(out_tensors), len(kvs)))
    for key, t, raw in kvs:
        head += pstr(key) + struct.pack("<I", t) + raw
    off = 0
    for name, nd, buf in out_tensors:
        head += pstr(name) + struct.pack("<I", len(nd)) + b"".join(struct.pack("<Q", d) for d in nd)
        head += struct.pack("<IQ", 0, off)
        off += (len(buf) + align - 1) // align * align
    head += b"\0" * ((-len(head)) % align)
    with open(dst, "wb") as f:
        f.write(head)
        for name, nd, buf in out_tensors:
            f.write(buf + b"\0" * ((-len(buf)) % align))


if __name__ == "__main__":
    main()
