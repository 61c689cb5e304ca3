#!/usr/bin/env python3
"""PNG plots of the benchmarks' JSON (`make bench`, bench/run.sh).

    python3 bench/plot.py [--out OUTDIR] DIR

Reads, from DIR, whichever of these a bench/run.sh run left (each written
by the script's --json option, see bench_json_write in bench/lib.sh):

    compare-llamacpp.json  bench/compare-llamacpp.sh: prefill and decode tok/s
                           in-process, over 1 batond, split over 2 batond
    transport.json         bench/transport.sh: batond against raw TCP
    roofline.json          bench/roofline.sh: decode against the memory roofline
    direct_path.json       bench/direct_path.sh: hub against direct, 3 stages

and writes into OUTDIR (default DIR):

    stages.png      prefill and decode tok/s by stage count (from compare-llamacpp)
    hub_direct.png  hub against direct path: the boundary hand-off latency
                    (transport) and decode tok/s on 3 stages (direct_path)
    roofline.png    fraction of the memory roofline per weight type (roofline)
    transport.png   MB/s and round-trip latency against raw TCP (transport)

Bars are medians over the repetitions, whiskers min..max. Each figure's
footer gives the host, date and command from the JSON. A plot whose input is
missing is skipped with a note; exit 1 when none could be drawn, 2 on a
usage error. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def load(d, name):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        print("plot.py: no %s: that plot is skipped" % path, file=sys.stderr)
        return None
    with open(path) as f:
        return json.load(f)


def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def whisker(rows, key, lo, hi):
    """yerr for bars of rows[key], from rows[lo]..rows[hi] where present."""
    down, up = [], []
    for r in rows:
        v = r.get(key)
        a, b = r.get(lo), r.get(hi)
        down.append(max(0.0, v - a) if num(v) and num(a) else 0.0)
        up.append(max(0.0, b - v) if num(v) and num(b) else 0.0)
    return [down, up]


def footer(fig, *docs):
    lines = []
    for d in docs:
        if d is None:
            continue
        lines.append("%s: %s, %s; %s" % (d.get("bench", "?"), d.get("host") or "host ?",
                                          d.get("date") or "date ?", d.get("command") or ""))
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=6, color="#555555", va="bottom")
    fig.tight_layout(rect=(0, 0.03 + 0.025 * len(lines), 1, 1))


def grouped_bars(ax, groups, series, values, errs=None, fmt="%.1f"):
    """groups along x, one bar per series in each; values[s][g] (None: no bar)."""
    n = max(1, len(series))
    width = 0.8 / n
    for i, s in enumerate(series):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        vs = [v if num(v) else 0.0 for v in values[s]]
        kw = {}
        if errs is not None:
            kw["yerr"] = errs[s]
            kw["capsize"] = 3
        bars = ax.bar(xs, vs, width, label=s, color=COLORS[i % len(COLORS)], **kw)
        for b, v in zip(bars, values[s]):
            if num(v):
                ax.annotate(fmt % v, (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2),
                            textcoords="offset points")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.grid(axis="y", alpha=0.3)


ARM_LABEL = {
    "llamacpp": "llama.cpp\n(best llama-bench)",
    "baton_inproc": "1 stage\nin-process",
    "baton_batond1": "1 stage\n(1 batond)",
    "baton_batond2": "2 stages\n(2 batond, 1,1)",
}


def plot_stages(doc, out):
    rows = doc["rows"]
    # several weight types (compare-llamacpp.sh --types): the first one
    wtype = rows[0].get("type") if rows else None
    rows = [r for r in rows if r.get("type") == wtype]
    arms = [a for a in ARM_LABEL if any(r["arm"] == a for r in rows)]
    threads = sorted({r["threads"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, fig_key in zip(axes, ["prefill", "decode"]):
        series = ["%d thread%s" % (t, "" if t == 1 else "s") for t in threads]
        values, errs = {}, {}
        for s, t in zip(series, threads):
            cell = [next((r for r in rows if r["arm"] == a and r["threads"] == t), {}) for a in arms]
            values[s] = [c.get(fig_key + "_tok_s") for c in cell]
            errs[s] = whisker(cell, fig_key + "_tok_s", fig_key + "_min", fig_key + "_max")
        grouped_bars(ax, [ARM_LABEL[a] for a in arms], series, values, errs)
        ax.set_ylabel("%s tok/s" % fig_key)
        ax.set_title("%s by stage count" % fig_key.capitalize())
        ax.legend(fontsize=8)
    p = rows[0].get("prompt") if rows else None
    n = rows[0].get("generated") if rows else None
    fig.suptitle("baton: prefill and decode by stage count (prompt %s, generated %s)" % (p, n),
                 fontsize=10)
    footer(fig, doc)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def plot_roofline(doc, out):
    rows = doc["rows"]
    types = []
    for r in rows:
        if r["type"] not in types:
            types.append(r["type"])
    threads = sorted({r["threads"] for r in rows})
    fig, ax = plt.subplots(figsize=(7, 4.2))
    series = ["%d thread%s" % (t, "" if t == 1 else "s") for t in threads]
    values, errs = {}, {}
    for s, t in zip(series, threads):
        cell = [next((r for r in rows if r["type"] == ty and r["threads"] == t), {}) for ty in types]
        values[s] = [c.get("roofline") for c in cell]
        errs[s] = whisker(cell, "roofline", "roofline_rep_min", "roofline_rep_max")
    grouped_bars(ax, [t.upper() for t in types], series, values, errs, fmt="%.2f")
    ax.axhline(1.0, color="#888888", lw=0.8, ls="--")
    ax.set_ylabel("decode bytes/s / triad bandwidth")
    ax.set_title("Decode against the memory roofline, per weight type")
    ax.legend(fontsize=8)
    footer(fig, doc)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def transport_rows(doc):
    return {(r["arm"], r["figure"]): r for r in doc["rows"]}


def plot_transport(doc, out):
    rows = transport_rows(doc)
    arms = [a for a in ["nokey", "key"] if any(k[0] == a for k in rows)]
    arm_label = {"raw": "raw TCP", "nokey": "batond, no key", "key": "batond, key (MAC)"}
    sizes = sorted({f.split("_", 1)[1] for (a, f) in rows if a == "raw" and f.startswith("send_")},
                   key=lambda s: float(s.rstrip("MiB") or 0))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    # throughput: SET (raw: send) and GET per size
    groups, keys = [], []
    for m in sizes:
        groups += ["SET %s\n(raw: send)" % m, "GET %s\n(raw: get)" % m]
        keys += [("send_" + m, "set_" + m), ("get_" + m, "get_" + m)]
    series = ["raw"] + arms
    values, errs = {}, {}
    for a in series:
        cell = [rows.get((a, rk if a == "raw" else bk), {}) for rk, bk in keys]
        values[arm_label[a]] = [c.get("value") for c in cell]
        errs[arm_label[a]] = whisker(cell, "value", "min", "max")
    grouped_bars(axes[0], groups, [arm_label[a] for a in series], values, errs, fmt="%.0f")
    axes[0].set_ylabel("MB/s")
    axes[0].set_title("Throughput against raw TCP (loopback)")
    axes[0].legend(fontsize=8)
    # latency: raw 1-byte round trip against the 4-byte GET and GRAPH_COMPUTE
    lat = [("rtt_1B", "get_4B_rtt", "4-byte GET\n(raw: 1-byte echo)"),
           ("rtt_1B", "graph_compute_rtt", "GRAPH_COMPUTE\n(raw: 1-byte echo)")]
    values, errs = {}, {}
    for a in series:
        cell = [rows.get((a, rk if a == "raw" else bk), {}) for rk, bk, _ in lat]
        values[arm_label[a]] = [c.get("value") for c in cell]
        errs[arm_label[a]] = whisker(cell, "value", "min", "max")
    grouped_bars(axes[1], [g for _, _, g in lat], [arm_label[a] for a in series], values, errs,
                 fmt="%.1f")
    axes[1].set_ylabel("round trip, us (lower is better)")
    axes[1].set_title("Latency against raw TCP")
    axes[1].legend(fontsize=8)
    fig.suptitle("batond transport against raw TCP", fontsize=10)
    footer(fig, doc)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def plot_hub_direct(transport, direct, out):
    panels = []
    if transport is not None:
        rows = transport_rows(transport)
        raw = next((r for (a, f), r in rows.items() if a == "raw" and f.startswith("handoff_")), None)
        hub = next((r for (a, f), r in rows.items()
                    if a == "key" and f.startswith("handoff_hub_")), None)
        dct = next((r for (a, f), r in rows.items()
                    if a == "key" and f.startswith("handoff_direct_")), None)
        if raw is not None and hub is not None:
            panels.append(("handoff", raw, hub, dct))
    if direct is not None:
        panels.append(("decode", direct))
    if not panels:
        print("plot.py: no hub/direct figures (transport.json without the key arm's hand-off, "
              "no direct_path.json): hub_direct.png skipped", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel[0] == "handoff":
            _, raw, hub, dct = panel
            size = hub["figure"].rsplit("_", 1)[1]
            cells = [raw, hub] + ([dct] if dct is not None else [])
            labels = ["raw TCP\n(get, send back)", "hub\n(GET 1, SET 2)"]
            if dct is not None:
                labels.append("direct\n(COPY_TENSOR_TO)")
            vals = [c.get("value") if num(c.get("value")) else None for c in cells]
            grouped_bars(ax, labels, ["hand-off"], {"hand-off": vals},
                         {"hand-off": whisker(cells, "value", "min", "max")}, fmt="%.0f")
            if dct is not None and not num(dct.get("value")):
                ax.annotate("direct: %s" % dct.get("value"), (2, 0), ha="center", va="bottom",
                            fontsize=8)
            ax.set_ylabel("us (lower is better)")
            ax.set_title("Boundary hand-off of %s between two batond" % size, fontsize=9)
        else:
            rows = panel[1]["rows"]
            arms = [r["arm"] for r in rows]
            grouped_bars(ax, ["%s\n(%s B/step via coordinator)" %
                              (a, "%.0f" % (r["request_bytes_per_step"] + r["reply_bytes_per_step"]))
                              for a, r in zip(arms, rows)], ["decode"],
                         {"decode": [r["decode_tok_s"] for r in rows]},
                         {"decode": whisker(rows, "decode_tok_s", "decode_min", "decode_max")})
            ax.set_ylabel("decode tok/s")
            ax.set_title("Decode on 3 stages, hub against direct path", fontsize=9)
    fig.suptitle("Hub against direct path", fontsize=10)
    footer(fig, *[transport if p[0] == "handoff" else direct for p in panels])
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description="PNG plots of the benchmarks' JSON")
    ap.add_argument("dir", help="folder with the JSON files of a bench/run.sh run")
    ap.add_argument("--out", help="folder for the PNGs (default: DIR)")
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        print("plot.py: %s: not a folder" % a.dir, file=sys.stderr)
        return 2
    out = a.out or a.dir
    os.makedirs(out, exist_ok=True)
    compare = load(a.dir, "compare-llamacpp.json")
    transport = load(a.dir, "transport.json")
    roofline = load(a.dir, "roofline.json")
    direct = load(a.dir, "direct_path.json")
    made = []
    if compare is not None and compare["rows"]:
        plot_stages(compare, os.path.join(out, "stages.png"))
        made.append("stages.png")
    if plot_hub_direct(transport, direct, os.path.join(out, "hub_direct.png")):
        made.append("hub_direct.png")
    if roofline is not None and roofline["rows"]:
        plot_roofline(roofline, os.path.join(out, "roofline.png"))
        made.append("roofline.png")
    if transport is not None and transport["rows"]:
        plot_transport(transport, os.path.join(out, "transport.png"))
        made.append("transport.png")
    for m in made:
        print("plot.py: wrote %s" % os.path.join(out, m))
    if not made:
        print("plot.py: nothing to plot in %s" % a.dir, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
