#!/usr/bin/env python3
"""A small HTTP client for tests/integration/test_serve.sh (Python's standard
library only: a fresh machine may lack curl).

  serve_client.py PORT get PATH [KEY]             -> prints "STATUS BODY"
  serve_client.py PORT post PATH JSON [KEY]       -> prints "STATUS BODY"
  serve_client.py PORT raw PATH BYTES_FILE        -> POSTs the file's bytes as is
  serve_client.py PORT stream PATH JSON           -> prints the events' JSON, one a
                                                     line, then "[DONE]" if it came
  serve_client.py PORT many PATH JSONL OUT        -> POSTs every line of JSONL at
                                                     once (a thread each), writes
                                                     "STATUS BODY" lines to OUT in
                                                     the same order
  serve_client.py PORT drop PATH JSON N           -> streams, reads N events, and
                                                     closes the connection
  serve_client.py PORT hangup PATH JSON           -> sends the request, waits 0.3 s and
                                                     closes the connection unread

As a module (test_serve.sh's checks): request(), and reply() and stream()
that give a completion's or chat completion's text, finish_reason and usage.
"""
import http.client
import json
import os
import sys
import threading
import time


def conn(port):
    return http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)


def request(port, method, path, body=None, key=None):
    c = conn(port)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        # SERVE_SCHEME: the scheme's spelling (its case must not count)
        headers["Authorization"] = os.environ.get("SERVE_SCHEME", "Bearer") + " " + key
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read().decode("utf-8")
    c.close()
    return r.status, data


def events(resp):
    """The data: lines of a server-sent event stream, as they come."""
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode("utf-8").rstrip("\r\n")
        if line.startswith("data: "):
            yield line[6:]


def stream_events(port, path, body):
    """(status, the events' JSON objects (or the error body), whether [DONE] came)."""
    c = conn(port)
    c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        data = r.read().decode("utf-8")
        c.close()
        return r.status, data, False
    assert r.getheader("Content-Type") == "text/event-stream", r.getheader("Content-Type")
    ev, done = [], False
    for e in events(r):
        assert not done, "an event after [DONE]: " + e
        if e == "[DONE]":
            done = True
        else:
            ev.append(json.loads(e))
    c.close()
    return r.status, ev, done


def reply(port, path, req):
    """A whole reply to req (a dict): (text, finish_reason, usage)."""
    status, body = request(port, "POST", path, json.dumps(req).encode("utf-8"))
    assert status == 200, (status, body)
    c = json.loads(body)["choices"][0]
    return (c["message"]["content"] if "message" in c else c["text"]), c["finish_reason"], \
        json.loads(body)["usage"]


def stream(port, path, req):
    """The streamed reply to req: (its events' text joined, finish_reason, usage); every
    event but the last without a finish_reason, the last without text, then [DONE]."""
    status, ev, done = stream_events(port, path, json.dumps(dict(req, stream=True)).encode())
    assert status == 200 and done and ev, (status, ev, done)
    cs = [e["choices"][0] for e in ev]
    assert all(c["finish_reason"] is None for c in cs[:-1]), cs
    text = "".join(c["delta"].get("content", "") if "delta" in c else c["text"] for c in cs)
    assert cs[-1].get("delta", {}).get("content", "") == "" and cs[-1].get("text", "") == "", cs
    return text, cs[-1]["finish_reason"], ev[-1]["usage"]


def main():
    port, cmd, path = sys.argv[1], sys.argv[2], sys.argv[3]
    if cmd == "get":
        key = sys.argv[4] if len(sys.argv) > 4 else None
        print(*request(port, "GET", path, key=key))
    elif cmd == "post":
        key = sys.argv[5] if len(sys.argv) > 5 else None
        print(*request(port, "POST", path, sys.argv[4].encode("utf-8"), key))
    elif cmd == "raw":
        with open(sys.argv[4], "rb") as f:
            print(*request(port, "POST", path, f.read()))
    elif cmd == "stream":
        status, ev, done = stream_events(port, path, sys.argv[4].encode("utf-8"))
        if status != 200:
            print(status, ev)
            return
        for e in ev:
            print(json.dumps(e))
        if done:
            print("[DONE]")
    elif cmd == "drop":
        c = conn(port)
        c.request("POST", path, body=sys.argv[4].encode("utf-8"),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        n = int(sys.argv[5])
        for i, _ in enumerate(events(r)):
            if i + 1 == n:
                break
        c.sock.close()
        print("dropped")
    elif cmd == "hangup":
        c = conn(port)
        c.request("POST", path, body=sys.argv[4].encode("utf-8"),
                  headers={"Content-Type": "application/json"})
        time.sleep(0.3)
        c.sock.close()
        print("closed")
    elif cmd == "many":
        with open(sys.argv[4]) as f:
            bodies = [line.strip() for line in f if line.strip()]
        out = [None] * len(bodies)

        def one(i):
            try:
                out[i] = "%d %s" % request(port, "POST", path, bodies[i].encode("utf-8"))
            except Exception as e:  # the line says what went wrong
                out[i] = "000 %r" % e

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with open(sys.argv[5], "w") as f:
            for line in out:
                f.write(line + "\n")
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
