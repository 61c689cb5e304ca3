#!/usr/bin/env python3
"""Which functions untrusted input reaches, and what guards each (issue 16).

usage: verify/reach.py [--build DIR] [--gcov DIR] [--proven FILE] [-o FILE]
                       [--check FILE]

1. Call graph. Every C file of src/ in DIR/compile_commands.json is compiled
   again with its own flags, at -O0 (so nothing is inlined away) and with
   GCC's -fcallgraph-info, into a temporary folder; the .ci files give the
   direct calls. A call through a pointer (GCC's "__indirect_call") is taken
   to reach every function whose address the sources take (a defined
   function's name used other than as `name(`): a sound over-approximation,
   so the table may list a function no input reaches, never the reverse.
2. Roots, by the kind of input (ROOTS below): "net" the functions that read
   what a peer sent (batond's connections, the lobby, its peer links, the
   coordinator's replies and handshake), "file" the loaders of files a user
   or another program may have written (GGUF, key, policy, prompt, meminfo),
   "http" the handler of baton serve's HTTP requests, "cli" the two
   programs' main functions (every option parser).
3. Status of each reachable function:
   proven   its name is in the proof gate's list (--proven: verify/proven.list
            when present, else every function defined in a file of
            verify/run.sh's PROOF_GROUPS), i.e. Frama-C WP proves its
            contract and the absence of run-time errors;
   fuzzed   the committed fuzz corpus, replayed by a --coverage build (--gcov:
            that build's folder, after the replay; `make coverage` makes it),
            executes it: the column gives its lines executed / lines;
   neither  otherwise.
Writes a Markdown table (default stdout): one row per function, grouped by
file, and a summary per file.
--check FILE (the committed verify/REACHABLE.md): exit 1 when a function the
file calls proven or fuzzed is now less (fuzzed or neither, or not reached
by the corpus at all), so the committed table never claims more than holds;
functions that gained, or are new, only print a note to regenerate it. A
"fuzzed" claim of a SIMD kernel whose level this CPU lacks (an AVX-512 file
on an AVX2-only CPU: the replay dispatches to the CPU's own level) is not
checked, and a line says how many were skipped.
"""
import argparse
import glob
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOTS = {
    "net": [
        "server_serve_connection", "server_lobby_run", "server_peer_copy",
        "baton_conn_read_reply", "baton_conn_wait", "baton_conn_connect_ex",
        "baton_conn_adopt_fd_ex",
    ],
    "file": [
        "baton_gguf_open", "baton_gguf_open_buffer", "baton_key_load", "baton_key_open",
        "baton_key_open_credential", "baton_policy_load", "baton_policy_parse",
        "baton_cli_read_lines", "baton_cli_split_lines", "baton_meminfo_parse",
        "baton_meminfo_available", "baton_tokenizer_from_gguf",
    ],
    "http": ["serve_handle"],
    "cli": ["main"],
}


def sources(build, root):
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = json.load(f)
    out = []
    for e in db:
        path = e["file"]
        rel = os.path.relpath(path, root)
        if not rel.startswith("src/") or not rel.endswith(".c"):
            continue
        out.append((rel, e))
    # one entry per file (a file built into two targets has the same flags)
    seen, uniq = set(), []
    for rel, e in out:
        if rel not in seen:
            seen.add(rel)
            uniq.append((rel, e))
    return uniq


def compile_ci(entries, tmp):
    objs = []
    for i, (rel, e) in enumerate(entries):
        args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
        cc, rest = args[0], args[1:]
        keep, skip = [], False
        for a in rest:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            if a.startswith("-O") or a in ("-c", "-Werror") or a == e["file"]:
                continue
            keep.append(a)
        obj = os.path.join(tmp, "%d.o" % i)
        cmd = ["gcc"] + keep + ["-O0", "-ffunction-sections", "-fdata-sections", "-fcallgraph-info", "-c", e["file"],
                                "-o", obj]
        r = subprocess.run(cmd, cwd=e["directory"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("reach: cannot compile %s:\n%s" % (rel, r.stderr))
        objs.append((obj, e["file"]))
    return glob.glob(os.path.join(tmp, "*.ci")), objs


NODE = re.compile(r'^node: \{ title: "([^"]+)" label: "([^"\\]+)\\n([^:"]+):(\d+):\d+"( shape)?')
EDGE = re.compile(r'^edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


def parse_ci(files, root):
    """defs: title -> (name, relfile, line); edges: title -> set(target titles)."""
    defs, edges = {}, {}
    for ci in files:
        with open(ci) as f:
            for line in f:
                m = NODE.match(line)
                if m and not m.group(5):
                    title, name, path, ln = m.group(1), m.group(2), m.group(3), int(m.group(4))
                    defs[title] = (name, os.path.relpath(path, root), ln)
                    continue
                m = EDGE.match(line)
                if m:
                    edges.setdefault(m.group(1), set()).add(m.group(2))
    return defs, edges


RELSEC = re.compile(r"^Relocation section '\.rela(\.[^']*)'")
RELENT = re.compile(r"^[0-9a-f]+\s+[0-9a-f]+\s+(R_X86_64_\w+)\s+[0-9a-f]+\s+(\S+)")
SYMENT = re.compile(r"^\s*\d+:\s+[0-9a-f]+\s+\d+\s+(\w+)\s+GLOBAL\s+\w+\s+(\d+)\s+(\S+)")
SECTION_PREFIXES = (".text.", ".data.rel.ro.local.", ".data.rel.ro.", ".data.rel.local.",
                    ".data.rel.", ".data.", ".rodata.", ".bss.")


def address_taken(objs, defs):
    """Function pointers, from the relocations of objects built with
    -ffunction-sections -fdata-sections. A call is a PLT32 relocation (in the
    .ci files already); any other reference from a function's code or from a
    data object to a function or data object is an edge: a pointer to a
    function exists only once code that names it has run, or in data that
    code names. So a call through a pointer needs no edge of its own: every
    function it can reach was named by something reachable. Returns the extra
    edges (nodes: the .ci titles for functions, "tu:name" or "name" for data)."""
    extra = {}

    def node(tu, name, globals_here):
        if (tu + ":" + name) in defs:
            return tu + ":" + name
        if name in defs or name in globals_here:
            return name
        return "data:" + tu + ":" + name

    globals_here = set()  # every object's defined global symbols
    for obj, _ in objs:
        syms = subprocess.run(["readelf", "-sW", obj], capture_output=True, text=True).stdout
        globals_here |= {m.group(3) for m in map(SYMENT.match, syms.splitlines())
                         if m and m.group(2) != "UND"}
    for obj, tu in objs:
        r = subprocess.run(["readelf", "-rW", obj], capture_output=True, text=True)
        owner = None
        for line in r.stdout.splitlines():
            m = RELSEC.match(line)
            if m:
                sec, owner = m.group(1), None
                for pre in SECTION_PREFIXES:
                    if sec.startswith(pre):
                        owner = node(tu, sec[len(pre):], globals_here)
                        break
                continue
            m = RELENT.match(line)
            if not m or owner is None or m.group(1) == "R_X86_64_PLT32":
                continue
            sym = m.group(2)
            for pre in SECTION_PREFIXES:
                if sym.startswith(pre):
                    sym = sym[len(pre):]
                    break
            else:
                if sym.startswith("."):
                    continue  # .rodata, .LC strings: no pointers to code
            target = node(tu, sym, globals_here)
            if target != owner:
                extra.setdefault(owner, set()).add(target)
    return extra


def reach(defs, edges, extra, roots):
    names = {}
    for title, (name, _, _) in defs.items():
        names.setdefault(name, []).append(title)
    seen, todo = set(), []
    for r in roots:
        todo += names.get(r, [])
    while todo:
        t = todo.pop()
        if t in seen or (t not in defs and t not in extra):
            continue
        seen.add(t)
        for d in list(edges.get(t, ())) + list(extra.get(t, ())):
            if d == "__indirect_call":
                continue  # its targets were named by reachable code: see address_taken
            if d in defs or d in extra:
                todo.append(d)
            else:
                todo += names.get(d, [])
    return seen


def proven_names(path, root):
    """Names of the proven functions ("file:F" for every function of file F
    when there is no list), and the files of the proof groups."""
    with open(os.path.join(root, "verify/run.sh")) as f:
        text = f.read()
    files = []
    for m in re.finditer(r"^PROOF_GROUPS\+?=\((.*?)^\)", text, re.M | re.S):
        files += re.findall(r"src/[\w/]+\.c", m.group(1))
    if path and os.path.exists(path):
        with open(path) as f:
            names = {l.split()[0].split(":")[0] for l in f if l.strip() and not l.startswith("#")}
        return names, set(files)
    return {"file:" + f for f in files}, set(files)


def gcov_functions(gdir, root):
    """(relfile, name) -> (lines executed, lines) from gcov's JSON output."""
    out = {}
    if not gdir:
        return None
    gcdas = glob.glob(os.path.join(gdir, "**", "*.gcda"), recursive=True)
    with tempfile.TemporaryDirectory() as tmp:
        for g in gcdas:
            subprocess.run(["gcov", "--json-format", "-o", os.path.dirname(g), g], cwd=tmp,
                           capture_output=True)
        for j in glob.glob(os.path.join(tmp, "*.gcov.json.gz")):
            with gzip.open(j, "rt") as f:
                data = json.load(f)
            for fi in data.get("files", []):
                rel = os.path.relpath(os.path.join(data.get("current_working_directory", ""),
                                                   fi["file"]), root)
                lines = {}
                for ln in fi.get("lines", []):
                    lines[ln["line_number"]] = max(lines.get(ln["line_number"], 0), ln["count"])
                for fn in fi.get("functions", []):
                    span = [c for n, c in lines.items()
                            if fn["start_line"] <= n <= fn["end_line"]]
                    key = (rel, fn["name"])
                    done = sum(1 for c in span if c > 0)
                    old = out.get(key, (0, len(span)))
                    out[key] = (max(done, old[0]), len(span))
    return out


PREAMBLE = """# Functions that input reaches, and what guards each (issue 16)

Generated by `verify/reach.py` (`make coverage` writes BUILD/reachable.md and
checks that this file claims no more than the run shows; regenerate with
`verify/reach.py --build build-coverage --gcov build-coverage -o
verify/REACHABLE.md` after `make coverage`). Input kinds: **net** what a peer
sends (batond's connections, the lobby, peer links, the coordinator's replies
and handshake), **file** the loaders of files (GGUF and its tokenizer, key,
policy, prompt, /proc/meminfo), **http** what an HTTP client sends to `baton
serve` (src/model/serve.c's request handler), **cli** the two programs' main functions
(every option parser, and so nearly everything). The call graph is GCC's
(-fcallgraph-info at -O0) plus every function whose address reachable code or
data takes (so it over-approximates). Status: **proven** Frama-C WP proves
its contract and the absence of run-time errors (verify/PROVEN.md);
**fuzzed** the committed fuzz corpus, replayed by the coverage build, runs
it (lines run / lines of the function); **neither** otherwise.

"""
RANK = {"proven": 2, "fuzzed": 1}

# CPU kernel levels (src/compute/cpu/matmul.h): the /proc/cpuinfo flags each
# needs. The corpus replay runs only the kernels of the level this CPU has,
# so a "fuzzed" claim of a higher level's function is not checked here.
LEVEL_FLAGS = {
    "avx2": ("avx2", "fma", "f16c"),
    "avx512": ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni"),
}


def kernel_level(rel, name):
    """The SIMD level whose code (rel, name) is, or None: the _avx2.c /
    _avx512.c files, and matmul_f32.h's functions by their prefix."""
    for level in LEVEL_FLAGS:
        if rel.startswith("src/compute/cpu/") and rel.endswith("_%s.c" % level):
            return level
        if rel == "src/compute/cpu/matmul_f32.h" and name.startswith(level + "_"):
            return level
    return None


def cpu_levels():
    """The levels this CPU's /proc/cpuinfo flags allow (None: unreadable,
    every claim is then checked)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {lv for lv, need in LEVEL_FLAGS.items() if flags.issuperset(need)}
    except OSError:
        pass
    return None


ROW = re.compile(r"^\| (\S+) \| `([^`]+)` \| [^|]* \| ([^|]+?) \|")


def check(path, rows):
    """Exit status of --check: 1 when a committed claim no longer holds."""
    def statuses(lines):
        st = {}
        for line in lines:
            m = ROW.match(line)
            if m:
                st[(m.group(1), m.group(2))] = m.group(3)
        return st
    with open(path) as f:
        old = statuses(f.read().splitlines())
    new = statuses(rows)
    worse, better, skipped = [], 0, {}
    levels = cpu_levels()
    for key, status in old.items():
        now = new.get(key, "not reached")
        lv = kernel_level(key[0], key[1])
        if (status == "fuzzed" and RANK.get(now, 0) < RANK.get(status, 0) and lv is not None
                and levels is not None and lv not in levels):
            skipped[lv] = skipped.get(lv, 0) + 1
            continue
        if RANK.get(now, 0) < RANK.get(status, 0):
            worse.append("%s %s: %s in %s, now %s" % (key[0], key[1], status, path, now))
    for key, status in new.items():
        if RANK.get(status, 0) > RANK.get(old.get(key, ""), 0) or key not in old:
            better += 1
    for lv in sorted(skipped):
        print("reach: %d fuzzed claim(s) of %s kernels not checked: this CPU lacks the %s "
              "level (/proc/cpuinfo), so the replay cannot run them" % (skipped[lv], lv, lv))
    for w in worse:
        print("reach: claims more than holds: " + w)
    if better:
        print("reach: %d function(s) gained a status or are new: regenerate %s "
              "(verify/reach.py ... -o %s)" % (better, path, path))
    if not worse:
        print("reach: every claim of %s holds (%d functions)" % (path, len(old)))
    return 1 if worse else 0


def main():
    ap = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build",
                    help="a configured CMake tree (its compile_commands.json; default: build)")
    ap.add_argument("--gcov", default="",
                    help="the --coverage tree after the corpus replay (make coverage: build-coverage)")
    ap.add_argument("--proven", default="verify/proven.list",
                    help="the proof gate's list, relative to the repository (default: verify/proven.list)")
    ap.add_argument("-o", "--output", default="", help="write the table there (default: stdout)")
    ap.add_argument("--check", default="",
                    help="the committed table (verify/REACHABLE.md) to check; needs --gcov")
    a = ap.parse_args()
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    build = os.path.abspath(a.build)
    if a.check and not a.gcov:
        # without coverage data every "fuzzed" claim would read as broken
        ap.error("--check needs --gcov DIR (the coverage tree after the replay: make coverage)")
    if not os.path.isfile(os.path.join(build, "compile_commands.json")):
        sys.exit("reach: %s has no compile_commands.json: give --build a configured CMake tree "
                 "(cmake -S . -B build)" % build)
    if a.gcov and not os.path.isdir(a.gcov):
        sys.exit("reach: --gcov %s: no such directory (make coverage makes build-coverage)" % a.gcov)
    for tool in ("gcc", "gcov", "readelf") if a.gcov else ("gcc", "readelf"):
        if shutil.which(tool) is None:
            sys.exit("reach: %s not found (scripts/install-deps.sh --full)" % tool)
    entries = sources(build, root)
    with tempfile.TemporaryDirectory() as tmp:
        cis, objs = compile_ci(entries, tmp)
        defs, edges = parse_ci(cis, root)
        extra = address_taken(objs, defs)
    kinds = {k: {t for t in reach(defs, edges, extra, r) if t in defs} for k, r in ROOTS.items()}
    proven, proven_files = proven_names(os.path.join(root, a.proven), root)
    cov = gcov_functions(os.path.abspath(a.gcov) if a.gcov else "", root)
    rows = {}
    for kind, titles in kinds.items():
        for t in titles:
            if defs[t][1].startswith("src/"):  # not the system headers' inlines
                rows.setdefault(t, set()).add(kind)
    out = ["| file | function | input | status | lines run by the corpus |",
           "|---|---|---|---|---|"]
    per_file = {}
    for t in sorted(rows, key=lambda t: (defs[t][1], defs[t][2], defs[t][0], t)):
        name, rel, _ = defs[t]
        # a name of the list counts in the proof groups' files only (a static
        # function elsewhere may share it)
        pr = (name in proven and rel in proven_files) or ("file:" + rel) in proven
        c = cov.get((rel, name)) if cov is not None else None
        if pr:
            status = "proven"
        elif c and c[0] > 0:
            status = "fuzzed"
        elif cov is None:
            status = "not proven (no coverage data)"
        else:
            status = "neither"
        runs = "%d / %d" % c if c else ("-" if cov is not None else "n/a")
        kinds_s = ", ".join(k for k in ROOTS if k in rows[t])
        out.append("| %s | `%s` | %s | %s | %s |" % (rel, name, kinds_s, status, runs))
        pf = per_file.setdefault(rel, [0, 0, 0, 0])
        pf[0] += 1
        pf[1 if pr else (2 if status == "fuzzed" else 3)] += 1
    summary = ["| file | reachable functions | proven | fuzzed | neither |",
               "|---|---|---|---|---|"]
    for rel in sorted(per_file):
        summary.append("| %s | %d | %d | %d | %d |" % ((rel,) + tuple(per_file[rel])))
    text = PREAMBLE + "\n".join(summary) + "\n\n" + "\n".join(out) + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    elif not a.check:
        sys.stdout.write(text)
    if a.check:
        sys.exit(check(a.check, out))


if __name__ == "__main__":
    main()
