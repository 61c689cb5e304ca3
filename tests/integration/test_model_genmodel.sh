#!/bin/bash
# gen-model is deterministic and its models run; a generated Q8_0 model and
# the real model quantized to Q8_0 and Q4_0 give the same greedy ids
# in-process and over 3 servers, for 1 and 2 threads, for ubatch 1 and 512.
# quantize: which matrices each type converts (f16: any row length), the
# warning when none is, and refusals (input as output, a missing directory).
# gen-model's integer options: too large (also past 2^64), not an integer,
# too small, each a usage error that writes nothing; a shape that breaks a
# rule names it; --vocab with --vocab-from, and a --vocab-from file whose
# tokenizer arrays have the wrong element types. quantize's usage errors name
# what was wrong; a conversion larger than the memory available is refused.
# An empty output path, and one no one can create (also for
# root), are refused before any work; success lines start "baton CMD:".
source "$(dirname "$0")/lib.sh"

"$BATON" gen-model --layers 3 --dim 64 --ff 96 --heads 4 --kv-heads 2 --vocab 400 --type q8_0 \
    --seed 11 -o "$TMP/g1.gguf" 2>"$TMP/g1.err" || fail "gen-model: $(cat "$TMP/g1.err")"
"$BATON" gen-model --layers 3 --dim 64 --ff 96 --heads 4 --kv-heads 2 --vocab 400 --type q8_0 \
    --seed 11 --out="$TMP/g2.gguf" 2>/dev/null || fail "gen-model (2), --output by a prefix"
cmp -s "$TMP/g1.gguf" "$TMP/g2.gguf" || fail "gen-model is not deterministic"
# type names in any case, as quantize takes them: Q8_0 is q8_0
"$BATON" gen-model --layers 3 --dim 64 --ff 96 --heads 4 --kv-heads 2 --vocab 400 --type Q8_0 \
    --seed 11 -o "$TMP/g2u.gguf" 2>/dev/null || fail "gen-model --type Q8_0"
cmp -s "$TMP/g1.gguf" "$TMP/g2u.gguf" || fail "gen-model --type Q8_0 differs from q8_0"
"$BATON" gen-model --layers 1 --dim 256 --ff 256 --heads 4 --vocab 400 --type Q4_K_M \
    -o "$TMP/gmix.gguf" 2>/dev/null || fail "gen-model --type Q4_K_M"
"$BATON" inspect "$TMP/gmix.gguf" >"$TMP/gmix.txt" || fail "inspect of the Q4_K_M model"
grep -q "blk.0.attn_q.weight  *q4_k " "$TMP/gmix.txt" || fail "gen-model --type Q4_K_M: attn_q is not q4_k"
"$BATON" gen-model --layers 3 --dim 64 --ff 96 --heads 4 --kv-heads 2 --vocab 400 --type q8_0 \
    --seed 12 -o "$TMP/g3.gguf" 2>/dev/null || fail "gen-model (3)"
cmp -s "$TMP/g1.gguf" "$TMP/g3.gguf" && fail "different seeds gave the same file"
# (output to a file first: grep -q on a pipe would end inspect with SIGPIPE)
"$BATON" inspect "$TMP/g1.gguf" >"$TMP/g1.txt" || fail "inspect of generated model"
grep -q "blk.2.ffn_down.weight  *q8_0  *96 x 64" "$TMP/g1.txt" || fail "inspect of generated model: tensor row"
# the success line starts as the errors do
[ "$(cat "$TMP/g1.err")" = "baton gen-model: wrote $TMP/g1.gguf (3 layers, dim 64, ff 96, 4 heads, 2 kv heads, q8_0)" ] ||
    fail "gen-model success line: $(cat "$TMP/g1.err")"
# a missing option is named (fresh-user walk: the message listed all five)
rc=0
"$BATON" gen-model --layers 1 --dim 64 --heads 4 2>"$TMP/miss.err" >/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "gen-model without --ff and -o exited $rc"
grep -q "required; missing: --ff -o$" "$TMP/miss.err" || fail "missing options not named: $(cat "$TMP/miss.err")"
# a shape that breaks a rule: the refusal names the rule and the values
# (they all used to say "inconsistent shape: need dim % heads == 0, ...")
for c in "--dim 48 --heads 16|--dim 48 / --heads 16 = 3: the head size must be even (RoPE rotates pairs)" \
         "--dim 50 --heads 4|--dim 50 is not a multiple of --heads 4: the heads split the embedding evenly (dim % heads == 0)" \
         "--dim 64 --heads 4 --kv-heads 3|--heads 4 is not a multiple of --kv-heads 3: each key/value head serves the same number of query heads (heads % kv-heads == 0)" \
         "--dim 64 --heads 4 --kv-heads 8|--heads 4 is not a multiple of --kv-heads 8: each key/value head serves the same number of query heads (heads % kv-heads == 0)" \
         "--dim 48 --heads 4 --type q4_0|--dim 48 is not a multiple of 32: q4_0 stores the rows of the matrices (--dim and --ff long) in blocks of 32" \
         "--dim 64 --ff 48 --heads 4 --type q8_0|--ff 48 is not a multiple of 32: q8_0 stores the rows of the matrices (--dim and --ff long) in blocks of 32" \
         "--dim 48 --heads 4 --type f16|--dim 48 is not a multiple of 32: gen-model writes f16 matrices only with --dim and --ff multiples of 32"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" gen-model --layers 1 --ff 64 ${c%%|*} -o "$TMP/bad.gguf" 2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 2 ] && [ "$(cat "$TMP/bad.err")" = "baton gen-model: ${c#*|}" ] && [ ! -e "$TMP/bad.gguf" ] ||
        fail "gen-model ${c%%|*}: rc $rc: $(cat "$TMP/bad.err")"
done
# --vocab and --vocab-from are alternatives: both is a usage error (--vocab
# used to be ignored)
rc=0; "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 --vocab 400 --vocab-from "$TMP/g1.gguf" \
    -o "$TMP/bad.gguf" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$TMP/bad.gguf" ] &&
    [ "$(cat "$TMP/bad.err")" = "baton gen-model: --vocab and --vocab-from are alternatives; give one (the vocabulary of --vocab-from FILE has its own size)" ] ||
    fail "gen-model --vocab with --vocab-from: rc $rc: $(cat "$TMP/bad.err")"
# a --vocab-from file that cannot be read is named with the option
rc=0; "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 --vocab-from "$TMP/none.gguf" \
    -o "$TMP/bad.gguf" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$TMP/bad.gguf" ] &&
    [ "$(cat "$TMP/bad.err")" = "baton gen-model: --vocab-from $TMP/none.gguf: cannot open: No such file or directory" ] ||
    fail "gen-model --vocab-from a missing file: rc $rc: $(cat "$TMP/bad.err")"
# a --vocab-from file whose tokenizer arrays have other element types (or
# scores / token types not one per token) is refused, naming the file and
# the key: the model was written and baton tokenize refused it. A good
# vocabulary of 300 pieces, then each array made wrong in turn (GGUF value
# types: 0 u8, 4 u32, 5 i32, 6 f32, 8 string, 9 array).
python3 - "$TMP" <<'PY' || fail "writing the vocabularies"
import struct, sys
def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b
def arr(et, fmt, vals):
    return struct.pack("<IIQ", 9, et, len(vals)) + b"".join(struct.pack(fmt, v) for v in vals)
def sarr(vals):
    return struct.pack("<IIQ", 9, 8, len(vals)) + b"".join(s(v) for v in vals)
pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)] + ["\u2581"]
pieces += [chr(97 + i % 26) * (1 + i // 26) for i in range(300 - len(pieces))]
n = len(pieces)
good = {"tokenizer.ggml.tokens": sarr(pieces), "tokenizer.ggml.scores": arr(6, "<f", [0.0] * n),
        "tokenizer.ggml.token_type": arr(5, "<i", [1] * n)}
bad = {"good": {},
       "tokens-u32": {"tokenizer.ggml.tokens": arr(4, "<I", range(n))},
       "tokens-scalar": {"tokenizer.ggml.tokens": struct.pack("<II", 4, 7)},
       "scores-i32": {"tokenizer.ggml.scores": arr(5, "<i", [0] * n)},
       "scores-short": {"tokenizer.ggml.scores": arr(6, "<f", [0.0] * (n - 1))},
       "types-f32": {"tokenizer.ggml.token_type": arr(6, "<f", [1.0] * n)},
       "merges-u8": {"tokenizer.ggml.merges": arr(0, "<B", [1, 2])}}
for name, change in bad.items():
    kv = dict(good, **change)
    kv = [("general.architecture", struct.pack("<I", 8) + s("llama")),
          ("tokenizer.ggml.model", struct.pack("<I", 8) + s("llama"))] + list(kv.items())
    b = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(s(k) + v for k, v in kv)
    open("%s/v-%s.gguf" % (sys.argv[1], name), "wb").write(b)
PY
"$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 --vocab-from "$TMP/v-good.gguf" \
    -o "$TMP/vg.gguf" 2>/dev/null && [ "$("$BATON" tokenize --model "$TMP/vg.gguf" ab)" = "1 259 260 261" ] ||
    fail "gen-model --vocab-from a good vocabulary"
for c in "tokens-u32|key 'tokenizer.ggml.tokens' is an array of u32, not of string (as llama.cpp writes and reads it)" \
         "tokens-scalar|key 'tokenizer.ggml.tokens' is a u32, not an array of string" \
         "scores-i32|key 'tokenizer.ggml.scores' is an array of i32, not of f32 (as llama.cpp writes and reads it)" \
         "scores-short|key 'tokenizer.ggml.scores' holds 299 values, not one per token (300)" \
         "types-f32|key 'tokenizer.ggml.token_type' is an array of f32, not of i32 (as llama.cpp writes and reads it)" \
         "merges-u8|key 'tokenizer.ggml.merges' is an array of u8, not of string (as llama.cpp writes and reads it)"; do
    rc=0
    "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 --vocab-from "$TMP/v-${c%%|*}.gguf" \
        -o "$TMP/vb.gguf" 2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 1 ] && [ ! -e "$TMP/vb.gguf" ] &&
        [ "$(cat "$TMP/bad.err")" = "baton gen-model: --vocab-from $TMP/v-${c%%|*}.gguf: ${c#*|}" ] ||
        fail "gen-model --vocab-from ${c%%|*}: rc $rc: $(cat "$TMP/bad.err")"
done
# quantize's usage errors say what was wrong, then the usage line
usage_q="usage: baton quantize IN.gguf OUT.gguf q8_0|q4_0|q5_0|q5_1|f16|bf16|f32|q4_k_m|q5_k_m|q6_k|q3_k_m|q2_k|iq4_xs|iq4_nl"
for c in "|missing IN.gguf, OUT.gguf and TYPE" "in.gguf|missing OUT.gguf and TYPE" \
         "in.gguf out.gguf|missing TYPE" "in.gguf out.gguf q8_0 x|unexpected argument 'x'" \
         "--bogus in.gguf out.gguf q8_0|unrecognized option '--bogus'" \
         "in.gguf out.gguf q8_0 -x|invalid option -- 'x'"; do
    rc=0
    # shellcheck disable=SC2086
    (cd "$TMP" && "$BATON" quantize ${c%%|*}) 2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 2 ] && [ "$(cat "$TMP/bad.err")" = "baton quantize: ${c#*|}
$usage_q" ] && [ ! -e "$TMP/out.gguf" ] || fail "quantize ${c%%|*}: rc $rc: $(cat "$TMP/bad.err")"
done
# an empty output path: a usage error (exit 2), as in baton run and bench
# (it was exit 1, a file error)
rc=0; "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 -o '' 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/bad.err")" = "baton gen-model: -o: an empty path (see \`baton gen-model --help\`)" ] ||
    fail "gen-model -o '': rc $rc: $(cat "$TMP/bad.err")"
rc=0; "$BATON" quantize "$TMP/g1.gguf" '' f16 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$TMP/bad.err")" = "baton quantize: OUT.gguf: an empty path (see \`baton quantize --help\`)
$usage_q" ] || fail "quantize to '': rc $rc: $(cat "$TMP/bad.err")"
# a FIFO (or a device) as the output: refused, and left as it was (the
# write renames a new file over its path; as root, -o /dev/full once
# replaced the device)
mkfifo "$TMP/out.fifo"
rc=0; timeout 10 "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 -o "$TMP/out.fifo" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ -p "$TMP/out.fifo" ] &&
    [ "$(cat "$TMP/bad.err")" = "baton gen-model: -o $TMP/out.fifo: not a regular file (the output replaces the file at its path, so it is written only to a regular file or a new one)" ] ||
    fail "gen-model -o FIFO: rc $rc: $(cat "$TMP/bad.err")"
# ... and so is a link to one (-o /dev/stdout on a pipe replaced the link)
ln -s "$TMP/out.fifo" "$TMP/fifo_link.gguf"
rc=0; timeout 10 "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 -o "$TMP/fifo_link.gguf" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ -L "$TMP/fifo_link.gguf" ] && grep -q "fifo_link.gguf: not a regular file" "$TMP/bad.err" ||
    fail "gen-model -o link to a FIFO: rc $rc: $(cat "$TMP/bad.err")"
rc=0; timeout 10 "$BATON" quantize "$TMP/g1.gguf" "$TMP/out.fifo" f16 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ -p "$TMP/out.fifo" ] &&
    [ "$(cat "$TMP/bad.err")" = "baton quantize: $TMP/out.fifo: not a regular file (the output replaces the file at its path, so it is written only to a regular file or a new one)" ] ||
    fail "quantize to a FIFO: rc $rc: $(cat "$TMP/bad.err")"
# an output no one can create, though access() lets root write there:
# refused before the model is made or read, naming the output
for c in "gen-model --layers 1 --dim 64 --ff 64 --heads 4 -o /proc/g.gguf|baton gen-model: -o /proc/g.gguf" \
         "quantize $TMP/g1.gguf /proc/q.gguf f16|baton quantize: /proc/q.gguf"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" ${c%%|*} 2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 1 ] && grep -qxE "${c#*|}: cannot create a file in /proc: [A-Za-z ]+" "$TMP/bad.err" &&
        [ "$(wc -l <"$TMP/bad.err")" -eq 1 ] || fail "${c%%|*}: rc $rc: $(cat "$TMP/bad.err")"
done
# the check leaves no temporary file behind in the output's directory
mkdir "$TMP/qdir"
rc=0; "$BATON" quantize "$TMP/nosuch.gguf" "$TMP/qdir/q.gguf" f16 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ -z "$(ls -A "$TMP/qdir")" ] || fail "quantize of a missing input: rc $rc, left: $(ls -A "$TMP/qdir")"
# integer options: too large (also past 2^64), not an integer, too small
for c in "--dim 99999999999999999999|--dim: '99999999999999999999' is too large (at most 1000000000)" \
         "--dim 1000000001|--dim: '1000000001' is too large (at most 1000000000)" \
         "--layers 0|--layers: '0' is too small (at least 1)" \
         "--layers 4097|--layers: '4097' is too large (at most 4096)" \
         "--vocab 2097153|--vocab: '2097153' is too large (at most 2097152)" \
         "--heads 4x|--heads: '4x' is not an integer" \
         "--seed 18446744073709551616|--seed: '18446744073709551616' is too large (at most 18446744073709551615)"; do
    rc=0
    # shellcheck disable=SC2086
    "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 ${c%%|*} -o "$TMP/int.gguf" 2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 2 ] && grep -qxF "baton gen-model: ${c#*|}" "$TMP/bad.err" && [ ! -e "$TMP/int.gguf" ] ||
        fail "gen-model ${c%%|*}: rc $rc: $(cat "$TMP/bad.err")"
done
# a shape larger than the memory available (MemAvailable in /proc/meminfo)
# is refused before anything is allocated (4096 layers of dim and ff 65536:
# about 450 TiB as Q8_0); the bounded run is the test (it used to grow until
# the OOM killer came)
gib='[0-9]+\.[0-9] GiB'
rc=0
timeout 20 "$BATON" gen-model --layers 4096 --dim 65536 --ff 65536 --heads 64 --type q8_0 \
    -o "$TMP/huge.gguf" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$TMP/huge.gguf" ] &&
    grep -qxE "baton gen-model: the model would take $gib, more than the $gib of memory available now \(MemAvailable in /proc/meminfo; this machine has $gib of RAM\); gen-model builds the file in memory: use fewer --layers or a smaller --dim, --ff or vocabulary" \
        "$TMP/bad.err" || fail "gen-model of 450 TiB: rc $rc: $(cat "$TMP/bad.err")"
# a shape under the machine's RAM but above the memory available now is
# refused too, naming both figures: f32, dim 256, vocabulary 512, and the
# largest ff (4096 layers) or, on a machine too small for ff 512, the most
# layers (ff 512) whose model (as genmodel.c counts it: the tensors and two
# float scratch rows) stays below the RAM. ulimit -v keeps a generator that
# took it from filling the machine (it fails at 1 GiB).
read -r layers ff want_bytes want_gib ram_gib <<<"$(python3 - <<'PY'
import os
ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
D, V = 256, 512
def total(L, F):
    big = D * max(V, F, D)
    return 8 * big + 2 * 4 * D * V + 4 * D + L * (4 * D * (2 * D + 2 * D + 2 * F) + 4 * F * D + 8 * D)
L, F = 4096, 512
if total(L, F) < ram:
    while total(L, F + 1024) < ram:
        F += 1024
    while total(L, F + 1) < ram:
        F += 1
else:
    while total(L, F) >= ram:
        L -= 1
print(L, F, total(L, F), "%.1f" % (total(L, F) / 2**30), "%.1f" % (ram / 2**30))
PY
)"
# (the model is within 13 MiB of the RAM; MemAvailable is below it by at
# least what the kernel holds)
avail_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
[ "$((avail_kib * 1024))" -lt "$want_bytes" ] ||
    fail "MemAvailable ($avail_kib kB) is not below a model of $want_bytes bytes under the RAM"
rc=0
# (ASan reserves terabytes of address space for its shadow and cannot run
# under ulimit -v; the plain build, which runs first, keeps the guard)
vlimit=1048576
[ "${BATON_ASAN:-}" = "1" ] && vlimit=unlimited
(ulimit -v "$vlimit"; exec timeout 20 "$BATON" gen-model --layers "$layers" --dim 256 --ff "$ff" \
    --heads 4 -o "$TMP/under.gguf") 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$TMP/under.gguf" ] &&
    grep -qxE "baton gen-model: the model would take ${want_gib//./\\.} GiB, more than the $gib of memory available now \(MemAvailable in /proc/meminfo; this machine has ${ram_gib//./\\.} GiB of RAM\); gen-model builds the file in memory: use fewer --layers or a smaller --dim, --ff or vocabulary" \
        "$TMP/bad.err" || fail "gen-model of $want_gib GiB (RAM $ram_gib GiB): rc $rc: $(cat "$TMP/bad.err")"
# without a MemAvailable line (kernels before 3.14) the RAM is the limit:
# /proc/meminfo replaced in a mount namespace of its own, where one may be made
printf 'MemTotal:       24684096 kB\nMemFree:        20314060 kB\n' >"$TMP/meminfo"
if unshare -m true 2>/dev/null; then
    rc=0
    unshare -m sh -c 'mount --bind "$1" /proc/meminfo && shift && exec "$@"' sh "$TMP/meminfo" \
        timeout 20 "$BATON" gen-model --layers 4096 --dim 65536 --ff 65536 --heads 64 --type q8_0 \
        -o "$TMP/huge.gguf" 2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 1 ] && [ ! -e "$TMP/huge.gguf" ] &&
        grep -qxE "baton gen-model: the model would take 121890\.1 GiB, more than this machine's ${ram_gib//./\\.} GiB of RAM \(gen-model builds the file in memory\); use fewer --layers or a smaller --dim, --ff or vocabulary" \
            "$TMP/bad.err" || fail "gen-model without MemAvailable: rc $rc: $(cat "$TMP/bad.err")"
    # MemAvailable 0 is a figure (nothing available), not an unreadable line
    printf 'MemTotal:       24684096 kB\nMemAvailable:          0 kB\n' >"$TMP/meminfo"
    rc=0
    unshare -m sh -c 'mount --bind "$1" /proc/meminfo && shift && exec "$@"' sh "$TMP/meminfo" \
        timeout 20 "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 \
        -o "$TMP/tiny0.gguf" 2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 1 ] && [ ! -e "$TMP/tiny0.gguf" ] &&
        grep -q "more than the 0\.0 GiB of memory available now (MemAvailable in /proc/meminfo" \
            "$TMP/bad.err" || fail "gen-model with MemAvailable 0: rc $rc: $(cat "$TMP/bad.err")"
else
    echo "note: no mount namespace here (not root): the RAM fallback is not checked" >&2
fi
# quantize holds the converted tensors until OUT is written: an F16 matrix
# whose F32 copy is more than this machine's RAM (in a sparse file of about
# half the RAM) is refused before anything is converted, naming the
# estimate (4 bytes per element, a row of floats, 4 x the input's header,
# as genmodel.c counts it) and the memory available. ulimit -v (the file's
# mapping and 1 GiB) keeps a quantizer that took it from filling the
# machine; 20 s bound a regression.
read -r wide_bytes want_gib ram_gib <<<"$(python3 - "$TMP/wide.gguf" <<'PY'
import os, struct, sys
ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
ne0 = 32768
ne1 = ram * 9 // 8 // (4 * ne0) + 1
def s(x):
    return struct.pack("<Q", len(x)) + x.encode()
head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + s("general.architecture") + struct.pack("<I", 8)
head += s("llama") + s("wide.weight") + struct.pack("<IQQIQ", 2, ne0, ne1, 1, 0)
head += bytes(-len(head) % 32)
with open(sys.argv[1], "wb") as f:
    f.write(head)
    f.truncate(len(head) + 2 * ne0 * ne1)
need = 4 * ne0 * ne1 + 4 * ne0 + 4 * len(head)
print(len(head) + 2 * ne0 * ne1, "%.1f" % (need / 2**30), "%.1f" % (ram / 2**30))
PY
)"
quant_tail="quantize holds the converted tensors in memory until $TMP/wide32.gguf is written"
vlimit=$((wide_bytes / 1024 + 1048576))
[ "${BATON_ASAN:-}" = "1" ] && vlimit=unlimited
rc=0
(ulimit -v "$vlimit"; exec timeout 20 "$BATON" quantize "$TMP/wide.gguf" "$TMP/wide32.gguf" f32) \
    2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$TMP/wide32.gguf" ] &&
    [ "$(sed -E "s/ the $gib of memory/ the A GiB of memory/" "$TMP/bad.err")" = "baton quantize: $TMP/wide.gguf: quantizing to f32 would take $want_gib GiB, more than the A GiB of memory available now (MemAvailable in /proc/meminfo; this machine has $ram_gib GiB of RAM); $quant_tail" ] ||
    fail "quantize of $want_gib GiB (RAM $ram_gib GiB): rc $rc: $(cat "$TMP/bad.err")"
# (without a MemAvailable line, the RAM is the limit)
printf 'MemTotal:       24684096 kB\nMemFree:        20314060 kB\n' >"$TMP/meminfo"
if unshare -m true 2>/dev/null; then
    rc=0
    (ulimit -v "$vlimit"
     exec unshare -m sh -c 'mount --bind "$1" /proc/meminfo && shift && exec "$@"' sh \
        "$TMP/meminfo" timeout 20 "$BATON" quantize "$TMP/wide.gguf" "$TMP/wide32.gguf" f32) \
        2>"$TMP/bad.err" || rc=$?
    [ "$rc" -eq 1 ] && [ ! -e "$TMP/wide32.gguf" ] &&
        [ "$(cat "$TMP/bad.err")" = "baton quantize: $TMP/wide.gguf: quantizing to f32 would take $want_gib GiB, more than this machine's $ram_gib GiB of RAM; $quant_tail" ] ||
        fail "quantize without MemAvailable: rc $rc: $(cat "$TMP/bad.err")"
fi
rm -f "$TMP/wide.gguf"
rc=0; "$BATON" gen-model --layers 1 --dim 64 --ff 64 --heads 4 -o "$TMP/nodir/g.gguf" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] && grep -qx "baton gen-model: -o $TMP/nodir/g.gguf: cannot create a file in $TMP/nodir: No such file or directory" \
    "$TMP/bad.err" || fail "gen-model into a missing directory: rc $rc: $(cat "$TMP/bad.err")"
"$BATON" --help >"$TMP/help.txt"
grep -q "quantize .*q8_0, q4_0, q5_0, q5_1, f16, bf16" "$TMP/help.txt" && grep -q "preset mix: q4_k_m, q5_k_m, q6_k, q3_k_m, q2_k," "$TMP/help.txt" || fail "baton --help: quantize types"
"$BATON" quantize --help >"$TMP/help.txt"
grep -q "^Exit status: 0 written" "$TMP/help.txt" && grep -q "f32 any" "$TMP/help.txt" || fail "quantize --help"
"$BATON" gen-model --help >"$TMP/help.txt"
grep -q "^Exit status: 0 written" "$TMP/help.txt" || fail "gen-model --help: exit status"
grep -q "^memory available now (MemAvailable in /proc/meminfo, or the machine's RAM" "$TMP/help.txt" ||
    fail "gen-model --help: the memory rule"

start_server a
start_server b
start_server c
S3=127.0.0.1:$PORT_a,127.0.0.1:$PORT_b,127.0.0.1:$PORT_c

models=("$TMP/g1.gguf")
if [ -n "${MODEL_DIR:-}" ] && [ -f "$MODEL_DIR/stories260K.gguf" ]; then
    "$BATON" quantize "$MODEL_DIR/stories260K.gguf" "$TMP/s_q8.gguf" q8_0 2>/dev/null || fail "quantize q8_0"
    "$BATON" quantize "$MODEL_DIR/stories260K.gguf" "$TMP/s_q4.gguf" q4_0 2>/dev/null || fail "quantize q4_0"
    "$BATON" inspect "$TMP/s_q4.gguf" >"$TMP/s_q4.txt" || fail "inspect of quantized model"
    grep -q "blk.0.attn_q.weight  *q4_0" "$TMP/s_q4.txt" || fail "quantized type"
    models+=("$TMP/s_q8.gguf" "$TMP/s_q4.gguf")
    # q4_0/q8_0 need rows (ne0) that are a multiple of 32: ffn_down's 172 is kept
    grep -q "blk.0.ffn_down.weight  *f32  *172 x 64" "$TMP/s_q4.txt" || fail "q4_0 converted a 172-long row"
    # f16 converts any row length: all 37 matrices, the 11 vectors kept
    "$BATON" quantize "$MODEL_DIR/stories260K.gguf" "$TMP/s_f16.gguf" f16 2>"$TMP/q.err" || fail "quantize f16"
    [ "$(cat "$TMP/q.err")" = "baton quantize: wrote $TMP/s_f16.gguf: 37 tensors converted to f16, 11 kept (vectors, other types, or already that type)
baton quantize: by type: f32 11 f16 37" ] ||
        fail "quantize f16: $(cat "$TMP/q.err")"
    grep -q "warning" "$TMP/q.err" && fail "quantize f16 warned"
    "$BATON" inspect "$TMP/s_f16.gguf" >"$TMP/s_f16.txt" || fail "inspect of the f16 model"
    grep -q "blk.0.ffn_down.weight  *f16  *172 x 64" "$TMP/s_f16.txt" || fail "f16 kept a 172-long row"
    # nothing to convert (all F32 already): exit 0 with a warning
    rc=0; "$BATON" quantize "$MODEL_DIR/stories260K.gguf" "$TMP/s_f32.gguf" f32 2>"$TMP/q.err" || rc=$?
    [ "$rc" -eq 0 ] && grep -q "0 tensors converted to f32, 48 kept" "$TMP/q.err" &&
        grep -qxF "baton quantize: warning: no tensor was converted to f32; $TMP/s_f32.gguf holds the tensors of $MODEL_DIR/stories260K.gguf unchanged" "$TMP/q.err" &&
        grep -qx "baton quantize: by type: f32 48" "$TMP/q.err" ||
        fail "quantize f32: rc $rc: $(cat "$TMP/q.err")"
    # a preset whose type no row can take (288 is not a multiple of 256):
    # "by the preset", and the by-type line shows what the rows became
    "$BATON" quantize "$MODEL_DIR/stories260K.gguf" "$TMP/s_q6.gguf" q6_k 2>"$TMP/q.err" || fail "quantize q6_k"
    grep -qx "baton quantize: wrote $TMP/s_q6.gguf: 37 tensors converted by the q6_k preset, 11 kept (vectors, norms, or not f32/f16/bf16)" \
        "$TMP/q.err" && grep -qx "baton quantize: by type: f32 11 f16 5 q8_0 32" "$TMP/q.err" ||
        fail "quantize q6_k: $(cat "$TMP/q.err")"
    # an output in a missing directory is named as given, not as its temporary file
    rc=0; "$BATON" quantize "$MODEL_DIR/stories260K.gguf" "$TMP/nodir/o.gguf" q8_0 2>"$TMP/q.err" || rc=$?
    [ "$rc" -eq 1 ] && grep -qx "baton quantize: $TMP/nodir/o.gguf: cannot create a file in $TMP/nodir: No such file or directory" \
        "$TMP/q.err" || fail "quantize into a missing directory: rc $rc: $(cat "$TMP/q.err")"
    # the input as the output (also through another name) is refused, the file unchanged
    cp "$TMP/s_q8.gguf" "$TMP/same.gguf"
    ln -s "$TMP/same.gguf" "$TMP/same_link.gguf"
    before=$(sha256sum <"$TMP/same.gguf")
    for out in "$TMP/same.gguf" "$TMP/same_link.gguf"; do
        rc=0; "$BATON" quantize "$TMP/same.gguf" "$out" q4_0 2>"$TMP/q.err" || rc=$?
        [ "$rc" -eq 1 ] && grep -q "are the same file" "$TMP/q.err" || fail "quantize in place ($out): rc $rc: $(cat "$TMP/q.err")"
    done
    [ "$(sha256sum <"$TMP/same.gguf")" = "$before" ] || fail "quantize in place changed the input"
elif [ "${CI:-}" = "true" ]; then
    fail "stories260K.gguf missing under CI"
fi

for m in "${models[@]}"; do
    ref=""
    for arm in "--servers local --threads 1" "--servers local --threads 2" \
               "--servers local --ubatch 1" "--servers local --split 1,1,1 --threads 2" \
               "--servers $S3 --split 1,1,1" "--servers $S3 --split 1,1,1 --ubatch 1"; do
        # shellcheck disable=SC2086
        "$BATON" run --model "$m" --prompt "Once upon a time there was" -n 24 --quiet \
            --ids-file "$TMP/ids.json" $arm 2>"$TMP/run.err" || { cat "$TMP/run.err" >&2; fail "$m: $arm"; }
        got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated"])' "$TMP/ids.json")
        [ -n "$ref" ] || ref=$got
        [ "$got" = "$ref" ] || fail "$(basename "$m") $arm: $got != $ref"
    done
    echo "ok: $(basename "$m"): $ref"
done
# `baton CMD --version` prints the version as `baton --version` does (it was
# a usage error); "--version" as an option's value stays a value
want=$("$BATON" --version)
for c in run info bench gen-model quantize inspect tokenize keygen; do
    [ "$("$BATON" "$c" --version)" = "$want" ] || fail "baton $c --version"
done
rc=0
"$BATON" tokenize --model "$TMP/g1.gguf" -- --version >"$TMP/tv.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] && [ "$(cat "$TMP/tv.out")" != "$want" ] || fail "tokenize -- --version: $(cat "$TMP/tv.out")"
echo PASS
