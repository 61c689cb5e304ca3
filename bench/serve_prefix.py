#!/usr/bin/env python3
"""bench/serve_prefix.py — what baton serve's prefix cache saves a chat client.

A chat client sends the whole conversation again with every turn. Two
`baton serve` (in-process stages, --threads 1) on loopback, one with
`--prefix-cache on` and one with `off`, hold the same conversation: each
turn adds a user message of about --words words and asks for --max-tokens
tokens (greedy), the reply becomes an assistant message. Per turn, the two
arms' requests alternate (ABBA: on first in odd turns); every turn's reply
must be the same text on both (the script stops otherwise). Prints one line
per turn: prompt tokens, tokens the cache held, each arm's request time
(from sending to the whole reply) and off/on; then the medians.

usage: bench/serve_prefix.py --baton BUILD/baton --model FILE
                             [--turns N] [--words N] [--max-tokens N] [--ctx N]
The model needs a chat template (e.g. `baton gen-model --arch qwen2 ...
--vocab-from ../shared/models/vocab/ggml-vocab-qwen2.gguf`).
Exit status: 0 done, 1 a failure, 2 a usage error.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("the river carried small boats past the old mill while children ran along the "
         "bank counting ducks and calling names into the wind").split()


def start(baton, model, ctx, cache, tmp):
    port_file = os.path.join(tmp, "port." + cache)
    log = open(os.path.join(tmp, "serve.%s.log" % cache), "w")
    p = subprocess.Popen([baton, "serve", "--model", model, "--listen", "127.0.0.1:0",
                          "--port-file", port_file, "--parallel", "1", "--ctx", str(ctx),
                          "--threads", "1", "--prefix-cache", cache],
                         stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(600):
        if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
            return p, int(open(port_file).read())
        if p.poll() is not None:
            log.close()
            sys.exit("serve_prefix: baton serve (--prefix-cache %s) exited %d:\n%s" % (
                cache, p.returncode, open(log.name).read()[-2000:]))
        time.sleep(0.1)
    p.kill()
    sys.exit("serve_prefix: baton serve (%s) did not listen" % cache)


def ask(port, messages, max_tokens):
    body = json.dumps({"messages": messages, "max_tokens": max_tokens})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", body=body,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    dt = time.perf_counter() - t0
    c.close()
    if r.status != 200:
        sys.exit("serve_prefix: HTTP %d: %s" % (r.status, data[:300].decode("utf-8", "replace")))
    return json.loads(data), dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--words", type=int, default=60)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=2048)
    a = ap.parse_args()
    if a.turns < 1 or a.words < 1 or a.max_tokens < 1 or a.ctx < 16:
        ap.error("--turns, --words, --max-tokens must be >= 1, --ctx >= 16")
    tmp = tempfile.mkdtemp(prefix="baton-prefix.")
    procs = {}
    try:
        for cache in ("on", "off"):
            procs[cache] = start(a.baton, a.model, a.ctx, cache, tmp)
        print("turn  prompt  cached     on (s)    off (s)  off/on")
        msgs = [{"role": "system", "content": "You answer briefly."}]
        ratios, on_t, off_t = [], [], []
        for t in range(1, a.turns + 1):
            msgs.append({"role": "user", "content": " ".join(
                WORDS[(t * 7 + i) % len(WORDS)] for i in range(a.words))})
            order = ("on", "off") if t % 2 else ("off", "on")
            got = {}
            for cache in order:
                got[cache] = ask(procs[cache][1], msgs, a.max_tokens)
            texts = {c: got[c][0]["choices"][0]["message"]["content"] for c in got}
            if texts["on"] != texts["off"]:
                sys.exit("serve_prefix: turn %d: the arms' replies differ" % t)
            u = got["on"][0]["usage"]
            ton, toff = got["on"][1], got["off"][1]
            print("%4d %7d %7d %10.3f %10.3f %7.2f" % (
                t, u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], ton, toff,
                toff / ton))
            on_t.append(ton)
            off_t.append(toff)
            ratios.append(toff / ton)
            msgs.append({"role": "assistant", "content": texts["on"]})
            if u["prompt_tokens"] + 2 * (a.words * 2 + a.max_tokens) >= a.ctx:
                print("(the next turn would not fit --ctx %d: stopped)" % a.ctx)
                break
        print("median: on %.3f s, off %.3f s, off/on %.2f" % (
            statistics.median(on_t), statistics.median(off_t), statistics.median(ratios)))
    finally:
        for p, _ in procs.values():
            p.send_signal(signal.SIGTERM)
        for p, _ in procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
