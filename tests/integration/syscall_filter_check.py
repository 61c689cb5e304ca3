"""Checks a systemd unit's SystemCallFilter= against batond's seccomp list.

    python3 syscall_filter_check.py UNIT SECCOMP_LIST CALL...

Expands the unit's SystemCallFilter= lines (allow lists, and '~' deny lists,
in order, as systemd.exec(5) describes) with `systemd-analyze syscall-filter`,
then requires every call of SECCOMP_LIST (policy/seccomp.list; a name ending
in '?' only where systemd knows it) and every extra CALL (what batond does
before its own filter goes on) to be allowed. Prints the allowed count and
exits 1 naming each call that the unit would refuse.
"""
import subprocess
import sys

cache = {}


def expand(group):
    """Every system call name in a systemd group, nested groups expanded."""
    if group in cache:
        return cache[group]
    out = subprocess.run(["systemd-analyze", "syscall-filter", "--no-pager", group],
                         check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines()[1:]:
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        names |= expand(item) if item.startswith("@") else {item}
    cache[group] = names
    return names


def items(words):
    names = set()
    for w in words:
        names |= expand(w) if w.startswith("@") else {w}
    return names


def main():
    unit, seccomp_list, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    allowed = None
    for line in open(unit):
        line = line.strip()
        if not line.startswith("SystemCallFilter="):
            continue
        value = line.split("=", 1)[1].strip()
        if value.startswith("~"):
            allowed = (allowed or set()) - items(value[1:].split())
        else:
            allowed = (allowed or set()) | items(value.split())
    if allowed is None:
        print("%s: no SystemCallFilter=" % unit)
        return 1
    known = expand("@known")
    need, optional = set(extra), set()
    for line in open(seccomp_list):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if name.endswith("?"):
            optional.add(name[:-1])
        else:
            need.add(name)
    need |= {n for n in optional if n in known}
    missing = sorted(need - allowed)
    print("%s: %d calls allowed; %d needed by batond, %d refused%s" %
          (unit, len(allowed), len(need), len(missing),
           (": " + " ".join(missing)) if missing else ""))
    return 1 if missing else 0


sys.exit(main())
