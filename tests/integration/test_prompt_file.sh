#!/bin/bash
# baton run --prompt-file: how the file is split into prompts (a fresh-user
# review found it wrong):
#   - a UTF-8 byte order mark at the start is not text of the first prompt;
#     a line ends at LF, CR LF or a CR alone (old Mac files), so CR CR LF
#     leaves no CR in the prompt: each prompt gives the token ids it gives
#     as --prompt alone, and the "[N] " lines hold the prompt's text.
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
echo PASS
