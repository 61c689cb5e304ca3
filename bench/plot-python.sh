#!/bin/sh
# Prints the first python3 that has matplotlib (bench/plot.py needs it;
# Debian's is /usr/bin/python3, a pyenv one on PATH may lack it); exit 1
# when there is none. Used by bench/run.sh and tests/integration/test_bench_plots.sh.
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import matplotlib' 2>/dev/null; then
        echo "$p"
        exit 0
    fi
done
exit 1
