#!/usr/bin/env python3
"""Compares a baton run with a llama.cpp reference (tests/reference/README.md).

  compare_logits.py FIXTURE IDS_JSON LOGITS_BIN REL

FIXTURE: a logits-NAME.txt of make-fixtures.sh (n_vocab, prompt, greedy ids,
logits rows of the first steps). IDS_JSON: baton run --ids-file. LOGITS_BIN:
baton run --logits-out (n_vocab little-endian binary32 per generated token).
The tolerance TOL is REL times the root mean square of llama.cpp's logits at
step 0 (the models' logits range from rms 0.6 to 8: one relative figure per
weight type fits both). Checks, step by step while the two greedy paths agree:
  - the prompts are the same ids, and baton generated as many tokens;
  - at each step with a reference row: max |baton - llama.cpp| <= TOL;
  - at each step, the same greedy id, unless the step is a near tie: baton's
    logits of its own id and of llama.cpp's id are within 2 TOL (both are
    within TOL of llama.cpp's, whose largest is llama.cpp's id); there the
    paths part and nothing after is compared.
Prints one line: the max |diff| over the compared rows, the steps compared,
and where the paths parted. Exit 0 on success, 1 on a failed check.
"""
import json
import struct
import sys


def main():
    fixture, ids_json, logits_bin, rel = sys.argv[1:5]
    rel = float(rel)
    ref_rows = {}
    with open(fixture) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "n_vocab":
                n_vocab = int(w[1])
            elif w[0] == "prompt":
                ref_prompt = [int(v) for v in w[1:]]
            elif w[0] == "greedy":
                ref_ids = [int(v) for v in w[1:]]
            elif w[0] == "logits":
                ref_rows[int(w[1])] = [float(v) for v in w[2:]]
    with open(ids_json) as f:
        j = json.load(f)
    with open(logits_bin, "rb") as f:
        raw = f.read()
    rows = len(raw) // (4 * n_vocab)
    if len(raw) != rows * 4 * n_vocab:
        return fail("%s: %d bytes, not rows of %d floats" % (logits_bin, len(raw), n_vocab))
    got = [list(struct.unpack_from("<%df" % n_vocab, raw, 4 * n_vocab * s)) for s in range(rows)]
    ids = j["generated"]
    if j["prompt"] != ref_prompt:
        return fail("prompt ids %s, the reference's %s" % (j["prompt"], ref_prompt))
    if len(ids) != len(ref_ids) or rows != len(ids):
        return fail("%d ids and %d logits rows, the reference %d ids" % (len(ids), rows, len(ref_ids)))
    if 0 not in ref_rows or len(ref_rows[0]) != n_vocab:
        return fail("%s: no logits row for step 0" % fixture)
    rms = (sum(v * v for v in ref_rows[0]) / n_vocab) ** 0.5
    tol = rel * rms
    max_diff, compared, parted = 0.0, 0, None
    for s in range(len(ids)):
        if s in ref_rows:
            if len(ref_rows[s]) != n_vocab:
                return fail("reference row %d has %d values" % (s, len(ref_rows[s])))
            d = max(abs(a - b) for a, b in zip(got[s], ref_rows[s]))
            max_diff = max(max_diff, d)
            compared += 1
            if not d <= tol:
                i = max(range(n_vocab), key=lambda i: abs(got[s][i] - ref_rows[s][i]))
                return fail("step %d: |logit %d| baton %.6g, llama.cpp %.6g: diff %.3g > %g"
                            % (s, i, got[s][i], ref_rows[s][i], d, tol))
        if ids[s] != ref_ids[s]:
            gap = got[s][ids[s]] - got[s][ref_ids[s]]
            if not gap <= 2 * tol:
                return fail("step %d: greedy id %d, llama.cpp's %d, and baton's logits of the "
                            "two are %.3g apart (> 2 x %g: not a near tie)"
                            % (s, ids[s], ref_ids[s], gap, tol))
            parted = "parted at step %d (near tie: %.3g)" % (s, gap)
            break
    print("max |diff| %.3g = %.3g x rms %.3g over %d rows (tolerance %.3g x rms = %.3g); ids %s" % (
        max_diff, max_diff / rms, rms, compared, rel, tol, parted or "identical (%d)" % len(ids)))
    return 0


def fail(msg):
    print("FAIL: " + msg)
    return 1


if __name__ == "__main__":
    sys.exit(main())
