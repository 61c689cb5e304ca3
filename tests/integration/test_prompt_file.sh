#!/bin/bash
# baton run --prompt-file: how the file is split into prompts, what is
# checked before the model loads, and the messages of its limits (a
# fresh-user review found each of these wrong):
#   - a UTF-8 byte order mark at the start is not text of the first prompt;
#     a line ends at LF, CR LF or a CR alone (old Mac files), so CR CR LF
#     leaves no CR in the prompt: each prompt gives the token ids it gives
#     as --prompt alone, and the "[N] " lines hold the prompt's text;
#   - every --output-dir/N.txt is checked before the model is loaded (a
#     directory or a symbolic link at the last one, not just at 1.txt, and
#     the prompt file itself), so nothing is written by a run that cannot
#     finish;
#   - a prompt past the tokenizer's 1 MiB is said in bytes (exit 2), one of
#     exactly 1 MiB passes that check; prompt + -n past the default context
#     says "the default --ctx"; the summary counts in the singular where
#     there is one.
source "$(dirname "$0")/lib.sh"
need_model

# alone TEXT NAME: the ids of TEXT as --prompt, into $TMP/NAME.json
alone() {
    "$BATON" run --model "$MODEL" --prompt "$1" -n 2 --quiet --ids-file "$TMP/$2.json" 2>"$TMP/alone.err" ||
        fail "alone '$1': $(cat "$TMP/alone.err")"
}
alone "Once upon a time" once
alone "Lily" lily
alone "Ben had a toy car" ben
# file NAME: a --prompt-file run of $TMP/NAME.txt, 2 at a time; its ids in
# $TMP/NAME.json, its text in $TMP/NAME.out
file() {
    "$BATON" run --model "$MODEL" --prompt-file "$TMP/$1.txt" --parallel 2 -n 2 --ids-file "$TMP/$1.json" \
        >"$TMP/$1.out" 2>"$TMP/$1.err" || fail "$1: exit $?: $(cat "$TMP/$1.err")"
}
# prompts NAME ALONE...: the run's sequences have the prompt ids of ALONE... in order
prompts() {
    local name=$1
    shift
    python3 - "$TMP" "$name" "$@" <<'PY' || fail "$name: prompts differ from the ones alone: $(cat "$TMP/$name.json")"
import json, sys
d, name, alone = sys.argv[1], sys.argv[2], sys.argv[3:]
seqs = json.load(open("%s/%s.json" % (d, name)))["sequences"]
assert len(seqs) == len(alone), (len(seqs), len(alone))
for s, a in zip(seqs, alone):
    assert s["prompt"] == json.load(open("%s/%s.json" % (d, a)))["prompt"], (s["index"], a)
PY
}

printf '\357\273\277Once upon a time\r\nLily\r\n' >"$TMP/bom.txt"
file bom
prompts bom once lily
grep -q "^\[1\] Once upon a time" "$TMP/bom.out" || fail "bom: [1] line: $(od -c "$TMP/bom.out" | head -3)"
printf 'Once upon a time\rLily\rBen had a toy car\r' >"$TMP/mac.txt"
file mac
prompts mac once lily ben
printf 'Once upon a time\r\r\nLily\r\r\n' >"$TMP/crcrlf.txt"
file crcrlf
prompts crcrlf once lily
if grep -q $'\r' "$TMP/crcrlf.out" "$TMP/mac.out"; then fail "a CR in the text: $(od -c "$TMP/crcrlf.out" | head)"; fi
# a BOM that is not at the start stays text
printf 'Lily\n\357\273\277Lily\n' >"$TMP/bom2.txt"
file bom2
python3 - "$TMP" <<'PY' || fail "a BOM after the first line was dropped: $(cat "$TMP/bom2.json")"
import json, sys
s = json.load(open(sys.argv[1] + "/bom2.json"))["sequences"]
assert s[0]["prompt"] != s[1]["prompt"], s
PY
# line numbers count CR endings too: the NUL is on line 3
printf 'a\rb\rc\0d\n' >"$TMP/nul.txt"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/nul.txt" >/dev/null 2>"$TMP/nul.err" || rc=$?
[ $rc = 2 ] && grep -qx "baton run: --prompt-file $TMP/nul.txt: line 3 holds a NUL byte" "$TMP/nul.err" ||
    fail "NUL after CR lines: exit $rc: $(cat "$TMP/nul.err")"
"$BATON" run --help >"$TMP/help.out"
grep -q "A line ends at LF, CR LF or a CR" "$TMP/help.out" && grep -q "UTF-8 byte order mark" "$TMP/help.out" ||
    fail "--help does not say how lines end"
echo "ok: a BOM at the start is skipped; lines end at LF, CR LF or a lone CR"

# --output-dir: every N.txt checked before the model loads
printf 'p%d\n' $(seq 10) >"$TMP/ten.txt"
# out_fail DIR MESSAGE: the run into DIR exits 1 with MESSAGE (exact line),
# before the model line, and leaves DIR as it was
out_fail() {
    local dir=$1 msg=$2 rc=0 before
    before=$(ls -A "$dir" | LC_ALL=C sort | tr '\n' ' ')
    "$BATON" run --model "$MODEL" --prompt-file "$TMP/ten.txt" --parallel 3 -n 2 --output-dir "$dir" \
        >"$TMP/od.out" 2>"$TMP/od.err" || rc=$?
    [ $rc = 1 ] && grep -qxF -- "$msg" "$TMP/od.err" || fail "--output-dir $dir: exit $rc, want 1 and '$msg': $(cat "$TMP/od.err")"
    if grep -q "^model:" "$TMP/od.err"; then fail "--output-dir $dir: the model was loaded first"; fi
    [ "$(ls -A "$dir" | LC_ALL=C sort | tr '\n' ' ')" = "$before" ] || fail "--output-dir $dir: files left: $(ls -A "$dir")"
    [ ! -s "$TMP/od.out" ] || fail "--output-dir $dir: text was generated"
}
mkdir -p "$TMP/d1/10.txt"
out_fail "$TMP/d1" "baton run: --output-dir $TMP/d1/10.txt: is a directory"
mkdir "$TMP/d2"
echo keep >"$TMP/victim"
ln -s "$TMP/victim" "$TMP/d2/7.txt"
out_fail "$TMP/d2" "baton run: --output-dir $TMP/d2/7.txt: a symbolic link, which is not followed (the output files are written only as files of their own); remove it or choose another --output-dir"
[ "$(cat "$TMP/victim")" = keep ] || fail "the link's target was written"
ln -s "$TMP/nowhere" "$TMP/d2/1.txt" # a dangling link: refused as well (1.txt is found first)
out_fail "$TMP/d2" "baton run: --output-dir $TMP/d2/1.txt: a symbolic link, which is not followed (the output files are written only as files of their own); remove it or choose another --output-dir"
mkdir "$TMP/d3"
cp "$TMP/ten.txt" "$TMP/d3/4.txt"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/d3/4.txt" --parallel 3 -n 2 --output-dir "$TMP/d3" \
    >/dev/null 2>"$TMP/od.err" || rc=$?
[ $rc = 1 ] && grep -qxF "baton run: --output-dir $TMP/d3/4.txt and --prompt-file $TMP/d3/4.txt are the same file; write it elsewhere" "$TMP/od.err" &&
    cmp -s "$TMP/ten.txt" "$TMP/d3/4.txt" && [ "$(ls "$TMP/d3")" = 4.txt ] ||
    fail "--output-dir holding the prompt file: exit $rc: $(cat "$TMP/od.err")"
# no other output may be the prompt file, another output, or one of the
# --output-dir files (a break-it review: --ids-file equal to the prompt file
# replaced it, exit 0; --ids-file DIR/1.txt took prompt 1's text's place)
cp "$TMP/ten.txt" "$TMP/q.txt"
mkdir "$TMP/d5"
clash() { # clash MESSAGE ARGS...
    local want=$1 rc=0
    shift
    (cd "$TMP" && "$BATON" run --model "$MODEL" -n 2 --quiet "$@") >/dev/null 2>"$TMP/clash.err" || rc=$?
    [ $rc = 1 ] && grep -qxF "baton run: $want" "$TMP/clash.err" && cmp -s "$TMP/ten.txt" "$TMP/q.txt" &&
        [ -z "$(ls "$TMP/d5")" ] || fail "$*: exit $rc: $(cat "$TMP/clash.err")"
}
clash "--ids-file q.txt and --prompt-file q.txt are the same file; write it elsewhere" \
    --prompt-file q.txt --ids-file q.txt
clash "--stats-json ./q.txt and --prompt-file q.txt are the same file; write it elsewhere" \
    --prompt-file q.txt --stats-json ./q.txt
clash "--ids-file d5/1.txt is the file --output-dir d5 gets for prompt 1; one would overwrite the other" \
    --prompt-file q.txt --output-dir d5 --ids-file d5/1.txt
clash "--stats-json ./d5/10.txt is the file --output-dir d5 gets for prompt 10; one would overwrite the other" \
    --prompt-file q.txt --output-dir d5 --stats-json ./d5/10.txt
clash "--ids-file and --logits-out are the same file (o.json); one would overwrite the other" \
    --prompt Once --ids-file o.json --logits-out ./o.json
"$BATON" keygen -o "$TMP/d5k.key" 2>/dev/null && mkdir "$TMP/d6" && mv "$TMP/d5k.key" "$TMP/d6/2.txt" ||
    fail "keygen"
rc=0
(cd "$TMP" && "$BATON" run --model "$MODEL" -n 2 --quiet --servers local --key d6/2.txt \
    --prompt-file q.txt --output-dir d6) >/dev/null 2>"$TMP/clash.err" || rc=$?
[ $rc = 1 ] && grep -qxF "baton run: --output-dir d6/2.txt and --key d6/2.txt are the same file; write it elsewhere" \
    "$TMP/clash.err" && [ "$(stat -c %s "$TMP/d6/2.txt")" = 32 ] ||
    fail "--output-dir holding the key: exit $rc: $(cat "$TMP/clash.err")"
# a dangling link is the file it points to (fopen follows it)
mkdir "$TMP/d7" && ln -s d7/1.txt "$TMP/dang.txt" && ln -s st.json "$TMP/dang2"
clash "--ids-file dang.txt is the file --output-dir d7 gets for prompt 1; one would overwrite the other" \
    --prompt-file q.txt --output-dir d7 --ids-file dang.txt
clash "--ids-file and --stats-json are the same file (dang2); one would overwrite the other" \
    --prompt-file q.txt --ids-file dang2 --stats-json st.json
[ ! -e "$TMP/st.json" ] && [ -z "$(ls "$TMP/d7")" ] || fail "a refused run wrote through the dangling links"
# a device is not overwritten: /dev/null twice is no clash
"$BATON" run --model "$MODEL" -n 2 --quiet --prompt Once --ids-file /dev/null --stats-json /dev/null \
    2>"$TMP/clash.err" || fail "/dev/null twice: $(cat "$TMP/clash.err")"
# ... while DIR/11.txt (no such prompt) and DIR/01.txt are other files
(cd "$TMP" && "$BATON" run --model "$MODEL" -n 2 --quiet --prompt-file q.txt --output-dir d5 \
    --ids-file d5/11.txt --stats-json d5/01.txt) 2>"$TMP/clash.err" && [ -s "$TMP/d5/11.txt" ] &&
    [ -s "$TMP/d5/01.txt" ] && [ -s "$TMP/d5/10.txt" ] || fail "d5/11.txt, d5/01.txt: $(cat "$TMP/clash.err")"
# a file already there is replaced; all 10 written
mkdir "$TMP/d4"
echo old >"$TMP/d4/10.txt"
"$BATON" run --model "$MODEL" --prompt-file "$TMP/ten.txt" --parallel 3 -n 2 --quiet --output-dir "$TMP/d4" \
    2>"$TMP/od.err" || fail "--output-dir run: $(cat "$TMP/od.err")"
[ "$(ls "$TMP/d4" | wc -l)" = 10 ] && [ "$(head -c 3 "$TMP/d4/10.txt")" = p10 ] || fail "--output-dir: $(ls "$TMP/d4")"
# an empty --output-dir is a usage error, as an empty --ids-file is (it was
# exit 1, "--output-dir : No such file or directory")
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/ten.txt" -n 2 --output-dir '' >/dev/null \
    2>"$TMP/od.err" || rc=$?
[ $rc = 2 ] && grep -qxF "baton run: --output-dir: an empty path (see \`baton run --help\`)" \
    "$TMP/od.err" || fail "--output-dir '': exit $rc: $(cat "$TMP/od.err")"
# a directory that does not exist says to create it (exit 1)
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/ten.txt" -n 2 --output-dir "$TMP/nodir" \
    >/dev/null 2>"$TMP/od.err" || rc=$?
[ $rc = 1 ] && grep -qxF "baton run: --output-dir $TMP/nodir: No such file or directory (create the \
directory first: mkdir -p)" "$TMP/od.err" || fail "--output-dir missing: exit $rc: $(cat "$TMP/od.err")"
echo "ok: every --output-dir file is checked before the model loads"

# the tokenizer's limit, in bytes, at the caller (exit 2)
python3 - "$TMP" <<'PY'
import sys
d = sys.argv[1]
open(d + "/big.txt", "w").write("Lily\n" + "a b " * 262144 + "c\n")  # prompt 2: 1 MiB + 1
open(d + "/mib.txt", "w").write("Lily\n" + "a b " * 262144 + "\n")   # prompt 2: 1 MiB
PY
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/big.txt" >/dev/null 2>"$TMP/big.err" || rc=$?
[ $rc = 2 ] && grep -qx "baton run: prompt 2 is 1048577 bytes; the tokenizer takes at most 1048576 bytes (1 MiB) per prompt" "$TMP/big.err" ||
    fail "a prompt of 1 MiB + 1: exit $rc: $(cat "$TMP/big.err")"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/mib.txt" >/dev/null 2>"$TMP/mib.err" || rc=$?
[ $rc = 2 ] && grep -q "^baton run: prompt 2 ([0-9]* tokens) + -n 64 = [0-9]* exceeds the default --ctx 512 (the positions of one sequence); give --ctx [0-9]* or more (more than the model was trained for: llama.context_length 2048)\$" "$TMP/mib.err" ||
    fail "a prompt of 1 MiB: exit $rc: $(cat "$TMP/mib.err")"
echo "ok: a prompt past 1 MiB names the limit"

# the context's name as the one-prompt run gives it
printf 'Once upon a time\n' >"$TMP/one.txt"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/one.txt" -n 600 >/dev/null 2>"$TMP/ctx.err" || rc=$?
[ $rc = 2 ] && grep -qx "baton run: prompt 1 (5 tokens) + -n 600 = 605 exceeds the default --ctx 512 (the positions of one sequence); give --ctx 605 or more" "$TMP/ctx.err" ||
    fail "default ctx: exit $rc: $(cat "$TMP/ctx.err")"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/one.txt" -n 8 --ctx 10 >/dev/null 2>"$TMP/ctx.err" || rc=$?
[ $rc = 2 ] && grep -qx "baton run: prompt 1 (5 tokens) + -n 8 = 13 exceeds --ctx 10 (the positions of one sequence); give --ctx 13 or more" "$TMP/ctx.err" ||
    fail "given ctx: exit $rc: $(cat "$TMP/ctx.err")"
# several prompts too long: the hint names the longest, so its --ctx fits all
# (it named the first, whose --ctx the next one still exceeded)
printf 'Once upon a time\nLily\nOnce upon a time there was a dog\n' >"$TMP/two.txt"
rc=0
"$BATON" run --model "$MODEL" --prompt-file "$TMP/two.txt" -n 8 --ctx 10 >/dev/null 2>"$TMP/ctx.err" || rc=$?
[ $rc = 2 ] && grep -qx "baton run: prompt 3 (10 tokens) + -n 8 = 18 exceeds --ctx 10 (the positions of one sequence; the longest of 2 prompts that do); give --ctx 18 or more" "$TMP/ctx.err" ||
    fail "two prompts past --ctx: exit $rc: $(cat "$TMP/ctx.err")"
"$BATON" run --model "$MODEL" --prompt-file "$TMP/two.txt" -n 8 --ctx 18 --quiet >/dev/null 2>"$TMP/ctx.err" ||
    fail "the --ctx the hint gave: $(cat "$TMP/ctx.err")"
# the singular where the count is one
"$BATON" run --model "$MODEL" --prompt-file "$TMP/one.txt" -n 1 --quiet 2>"$TMP/sum.err" ||
    fail "one prompt: $(cat "$TMP/sum.err")"
grep -q "^summary: 1 sequence (1 at a time), prompt 5 tokens, generated 1 token, .* (all sequences, 0 steps), stages 1\$" "$TMP/sum.err" ||
    fail "summary of one: $(grep summary "$TMP/sum.err")"
"$BATON" run --model "$MODEL" --prompt "Lily" -n 1 --quiet 2>"$TMP/sum.err" || fail "one token: $(cat "$TMP/sum.err")"
grep -q "^summary: prompt [0-9]* tokens, generated 1 token, " "$TMP/sum.err" || fail "summary: $(grep summary "$TMP/sum.err")"
echo "ok: the default context is named so; one of a kind is singular"

# the "[N] " lines hold the text byte for byte as the prompt alone streams
# it, NUL bytes included: at --temp 50 --seed 9 stories260K samples <0x00>
# (id 3) as the 46th token of this prompt, and the text after it was lost
# (the lines were printed as C strings); --output-dir kept it
P="Once upon a time there was a little"
SAMPLE=(-n 60 --temp 50 --seed 9)
"$BATON" run --model "$MODEL" --prompt "$P" "${SAMPLE[@]}" --ids-file "$TMP/nul.json" \
    >"$TMP/nul_alone.out" 2>"$TMP/nul.err" || fail "NUL alone: $(cat "$TMP/nul.err")"
[ "$(field "$TMP/nul.json" 'j["generated"].index(3) < 59')" = True ] ||
    fail "NUL alone: no <0x00> before the last token: $(cat "$TMP/nul.json")"
printf '%s\nLily\n' "$P" >"$TMP/nul.txt"
"$BATON" run --model "$MODEL" --prompt-file "$TMP/nul.txt" --parallel 2 "${SAMPLE[@]}" \
    >"$TMP/nul_file.out" 2>"$TMP/nul.err" || fail "NUL file: $(cat "$TMP/nul.err")"
python3 - "$TMP/nul_alone.out" "$TMP/nul_file.out" <<'PY' || fail "NUL: the [1] lines differ from the text alone"
import sys
alone = open(sys.argv[1], "rb").read()
lines = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
one = b"\n".join(l[4:] for l in lines if l.startswith(b"[1] ")) + b"\n"
assert b"\0" in alone and one == alone, (alone, one)
PY
echo "ok: the [N] lines keep a NUL byte of the text and what follows it"
echo PASS
