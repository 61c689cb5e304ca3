#!/usr/bin/env bash
# The manual pages in man/ against the programs they describe:
#   - every long option batond --help prints appears in batond(8);
#   - every long option of `baton COMMAND --help` appears in baton(1), in
#     that command's subsection ("baton COMMAND");
#   - and where the option is the program's own (in --help's usage lines,
#     or first on one of its lines), the page describes it: it begins a
#     tagged item (or a paragraph) of that page or subsection. Options that
#     a help text only mentions ("batond --key" in baton keygen's, the
#     policy flags of batond's examples) need only appear;
#   - every key of batond --print-policy (with the key files and a peer set,
#     so that all keys print) has an entry in batond.policy(5) (.It Cm KEY)
#     whose "Default:" is the value batond prints without a policy;
#   - each page renders without a warning: groff -mandoc -ww prints
#     nothing, nor mandoc -Tlint where mandoc is installed (apart from
#     "referenced manual not found" for pages outside this project, which
#     depends on what the machine has installed: this project's own
#     cross-references are checked here instead).
# MAN_DIR (default $SRC_DIR/man) names the pages to check.
. "$(dirname "$0")/lib.sh"
: "${SRC_DIR:?}"
MAN_DIR=${MAN_DIR:-$SRC_DIR/man}
PAGES=(baton.1 batond.policy.5 batond.8)
if ! command -v groff >/dev/null; then
    echo "SKIP: groff not installed (package groff-base)" >&2
    exit 77
fi
for p in "${PAGES[@]}"; do [ -f "$MAN_DIR/$p" ] || fail "$MAN_DIR/$p missing"; done

# render PAGE: plain text, lines wide enough that nothing is broken or
# hyphenated
render() {
    groff -mandoc -Tascii -rLL=2000n -P-c -P-b -P-u "$MAN_DIR/$1" 2>/dev/null
}
# long_options: the --options in stdin's text (not --SETTING, a placeholder)
long_options() {
    { grep -o -- '--[a-z0-9][a-z0-9-]*' || true; } | sed 's/-*$//' | LC_ALL=C sort -u
}
# own_options: the options of a --help text (stdin) that are the program's
# own: those of its usage lines (the "usage:" line and the lines indented
# 6 or more right after it) and those that begin a line of its option list
# (indented 1 or 2)
own_options() {
    awk '/^usage:/ { u = 1; print; next }
        u && /^      / { print; next }
        { u = 0 }
        /^  ?--/ { print $1 }' | long_options
}
# tags: the tags of the tagged items (and the starts of paragraphs that
# begin with an option) of rendered text (stdin): a line indented 5 that
# begins with '-', up to two blanks
tags() {
    sed -n 's/^     \(-.*\)$/\1/p' | sed 's/  .*//'
}
# check_options WHAT HELP TEXT: every option of HELP in TEXT, the own ones
# in TEXT's tags
check_options() {
    local opt own tagged
    own=$(own_options <<<"$2")
    tagged=$(tags <<<"$3")
    for opt in $(long_options <<<"$2"); do
        if grep -qxF -- "$opt" <<<"$own"; then
            has_option "$tagged" "$opt" || miss "$1: $opt is not described (no item for it)"
        else
            has_option "$3" "$opt" || miss "$1: $opt"
        fi
        n=$((n + 1))
    done
}
# has_option TEXT OPT: OPT as a whole option in TEXT (--peer is not found in
# --peer-key)
has_option() {
    grep -Eq -- "(^|[^a-z0-9-])$2([^a-z0-9-]|\$)" <<<"$1"
}

errors=0
miss() {
    echo "MISSING: $*" >&2
    errors=$((errors + 1))
}

# ---- rendering: no warnings ----
for p in "${PAGES[@]}"; do
    out=$(groff -mandoc -ww -z -Tutf8 "$MAN_DIR/$p" 2>&1) || fail "groff $p exited $?: $out"
    [ -z "$out" ] || fail "groff -ww $p: $out"
done
if command -v mandoc >/dev/null; then
    for p in "${PAGES[@]}"; do
        out=$(mandoc -Tlint "$MAN_DIR/$p" 2>&1 |
            grep -Ev 'referenced manual not found: Xr |outdated mandoc.db lacks ' || true)
        [ -z "$out" ] || fail "mandoc -Tlint $p: $out"
    done
    echo "ok: groff -ww and mandoc -Tlint print nothing"
else
    echo "note: mandoc not installed; groff -ww only" >&2
    echo "ok: groff -ww prints nothing"
fi
# this project's cross-references name its pages
for p in "${PAGES[@]}"; do
    while read -r name sec; do
        case $name in
        baton | batond | batond.policy)
            [ -f "$MAN_DIR/$name.$sec" ] || fail "$p: .Xr $name $sec: no man/$name.$sec"
            ;;
        esac
    done < <(sed -n 's/^\.Xr \([^ ]*\) \([0-9]\).*/\1 \2/p' "$MAN_DIR/$p")
done

# ---- batond(8) ----
page=$(render batond.8)
n=0
check_options "batond.8 (batond --help)" "$("$BATOND" --help)" "$page"
[ "$n" -ge 15 ] || fail "batond --help gave only $n long options"
echo "ok: batond.8 names the $n long options of batond --help"

# ---- baton(1): each command's options in its own subsection ----
page=$(render baton.1)
# the subsection of COMMAND: from its heading ("   baton COMMAND", indented
# 3) to the next heading (indented less than 5)
subsection() {
    awk -v h="   baton $1" '$0 == h { on = 1; next }
        on && match($0, /[^ ]/) > 0 && RSTART <= 5 { exit }
        on { print }' <<<"$page"
}
cmds=$("$BATON" --help | sed -n '/^commands:/,/^$/s/^  \([a-z-][a-z-]*\) .*/\1/p')
[ "$(wc -w <<<"$cmds")" -ge 7 ] || fail "baton --help lists only: $cmds"
n=0
for cmd in $cmds; do
    text=$(subsection "$cmd")
    [ -n "$text" ] || { miss "baton.1: no subsection 'baton $cmd'"; continue; }
    help=$("$BATON" "$cmd" --help) || fail "baton $cmd --help exited $?"
    # every command takes --help, whether its text says so or not
    check_options "baton.1, baton $cmd (baton $cmd --help)" "$help
  --help" "$text"
done
check_options "baton.1 (baton --help)" "$("$BATON" --help)" "$page"
echo "ok: baton.1 has a subsection for each of: $(tr '\n' ' ' <<<"$cmds")($n options)"

# ---- batond.policy(5) ----
page=$(render batond.policy.5)
src="$MAN_DIR/batond.policy.5"
"$BATOND" --print-policy >"$TMP/defaults" || fail "batond --print-policy exited $?"
"$BATOND" --print-policy --key /k --peer-key /p --peer 127.0.0.1:1 >"$TMP/all" ||
    fail "batond --print-policy with keys and a peer exited $?"
keys=$(sed -n 's/^\([a-z0-9_]*\) = .*/\1/p' "$TMP/all" | LC_ALL=C sort -u)
[ "$(wc -w <<<"$keys")" -ge 27 ] || fail "batond --print-policy lists only: $keys"
for key in $keys; do
    grep -qw -- "$key" <<<"$page" || { miss "batond.policy.5: $key (batond --print-policy)"; continue; }
    # the entry: from ".It Cm KEY" to the next .It or .El
    entry=$(awk -v k="$key" '$1 == ".It" && $2 == "Cm" && $3 == k { on = 1; next }
        on && /^\.(It|El)( |$)/ { exit }
        on { print }' "$src")
    [ -n "$entry" ] || { miss "batond.policy.5: no entry '.It Cm $key'"; continue; }
    want=$(sed -n "s/^$key = //p" "$TMP/defaults")
    [ -n "$want" ] || want=none # key_file, peer_key_file, peer: unset by default
    grep -Eq "^Default: $(sed 's/[.]/[.]/g' <<<"$want")([ .,]|\$)" <<<"$entry" ||
        miss "batond.policy.5: $key: no 'Default: $want' in its entry (batond --print-policy)"
done
echo "ok: batond.policy.5 has an entry with its default for each of $(wc -w <<<"$keys") keys"

[ "$errors" -eq 0 ] || fail "$errors missing from the manual pages (see above)"
echo "PASS"
