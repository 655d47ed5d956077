#!/usr/bin/env python3
"""A randomized live fuzz campaign against a running `snug serve` (docs/robustness.md).

    fuzz_live.py --snug build-asan/snug --duration 300 [--seed 1] [--parallel 2] [--workers 8]
    fuzz_live.py --snug build-asan/snug --replay OUT/ring.json       # send saved requests again

Starts `snug serve MODEL --parallel N --ctx 512 --threads 1 --max-body 64K
--idle-timeout 2 --timeout 60 -q` on a free port (ASAN_OPTIONS=detect_leaks=1
in its environment), then for --duration seconds runs at once:

- --workers hostile clients, each a loop of randomly chosen attacks (the kinds
  in KINDS below): random bytes; requests whose JSON bodies are valid chat or
  completion bodies mutated (wrong types, huge numbers, bad max_tokens, deep
  nesting, huge strings, invalid UTF-8, NUL bytes, duplicate keys, unknown
  fields, many stop strings, odd roles, byte flips); bodies over --max-body;
  a Content-Length that lies; truncated requests; slowloris; chunked bodies
  with bad chunk sizes; streams left after a few events; clients that leave
  before a non-streamed answer; random methods, paths and versions; pipelined
  requests; many idle connections; odd headers; a slow reader; a half-close.
  Each answer of snug's own must be JSON (or events of it) in UTF-8.
- two good clients in a loop, a greedy chat and a greedy completion request
  (max_tokens 16), one client non-streamed, one streamed: every answer must be
  the one taken before the hostile load started, which must be `snug
  generate`'s. A failed request (not 200, a 429 being retried; over 60 s) or a
  different answer is a failure.
- a monitor: GET /health every second (no answer in 10 s: a hang), GET
  /metrics every 5 s (200, Prometheus text, counters that never go down,
  gauges in range).

Then the hostile clients stop, the slots must go idle, the good requests
answer once more, SIGTERM: the server must exit 0 within 60 s (under ASan a
leak makes it nonzero) with no sanitizer report on its stderr. Every attack
is a script of socket operations made from the seeded RNG of its worker; the
last 300 are kept and, on a failure, written to --out as ring.json, which --replay
sends again (one script after the other, on one fresh server). Exit status 0
(pass), 1 (a failure), 77 (skipped: no model or no `snug serve`).
"""
import argparse
import base64
import collections
import http.client
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

MAX_BODY = 64 << 10
IDLE_S = 2
CTX = 512
GOOD_TIMEOUT_S = 60
CHAT_Q = "What is the capital of France? Answer in one sentence."
COMPLETE_Q = "The capital of France is"
GOOD_N = 16
HOSTILE_CONNS = 48  # the server takes parallel + queue (64) + 64 connections; the rest are the good clients'


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


# ---- the server ---------------------------------------------------------------------------------------------


class Server:
    def __init__(self, snug, model, parallel, out):
        self.port = free_port()
        self.log_path = os.path.join(out, "server.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS"), "detect_leaks=1") if x)
        env["UBSAN_OPTIONS"] = ":".join(x for x in (env.get("UBSAN_OPTIONS"), "print_stacktrace=1") if x)
        self.cmd = [snug, "serve", model, "--port", str(self.port), "--parallel", str(parallel), "--ctx", str(CTX),
                    "--threads", "1", "--max-body", "64K", "--idle-timeout", str(IDLE_S), "--timeout",
                    str(GOOD_TIMEOUT_S), "-q"]
        self.p = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.p.poll() is not None:
                raise RuntimeError(f"snug serve exited {self.p.returncode}:\n{self.tail()}")
            try:
                if self.get("/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"snug serve did not come up:\n{self.tail()}")

    def tail(self, n=4000):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-n:]

    def get(self, path, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def stop(self, timeout):
        """SIGTERM; (exit status or None if it did not exit in time, seconds taken)."""
        t0 = time.time()
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.time() - t0

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.log.close()

    def sanitizer_reports(self):
        with open(self.log_path, errors="replace") as f:
            text = f.read()
        return [line for line in text.splitlines()
                if "ERROR: AddressSanitizer" in line or "ERROR: LeakSanitizer" in line or "runtime error:" in line]


def generate(snug, model, prompt, chat):
    cmd = [snug, "generate", model, "-p", prompt, "--temp", "0", "-n", str(GOOD_N), "-q", "--threads", "1"]
    if not chat:
        cmd.append("--no-chat")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"snug generate failed ({r.returncode}): {r.stderr}")
    return r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout


# ---- hostile scripts: socket operations, run by one interpreter ---------------------------------------------
#
# A script is a list of operations on numbered connections:
#   ["open", i(, rcvbuf)]               connect (with rcvbuf: that SO_RCVBUF)
#   ["try_open", i]                     connect if the connection budget allows at once
#   ["send", i, bytes]                  send (a reset or a closed peer is an outcome, not an error)
#   ["sleep", s]
#   ["recv", i, timeout_s, want, n]     read until n complete responses (want "responses"), n SSE events
#                                       ("events"), the peer's close ("close"), or the timeout
#   ["drain", i, timeout_s, want, n, most]  the same, at most `most` bytes a read, and no outcomes yet
#   ["shutdown", i]                     half-close: no more sending
#   ["close", i, rst]                   close (rst: with SO_LINGER 0, a TCP reset)
# Each recv adds what came back on its connection so far to the outcomes: the HTTP statuses read, or
# closed / reset / timeout / garbage when no status line came, and bad-body-STATUS for an answer of
# snug's that is not valid JSON (or events of it) in UTF-8, an error without OpenAI's error body, or a
# finished stream without [DONE].

BUDGET = threading.BoundedSemaphore(HOSTILE_CONNS)
RESP_HEAD = re.compile(rb"HTTP/\d\.\d (\d{3})")


def parse_responses(buf):
    """The HTTP responses in buf: [{"status", "hdrs", "body", "complete"}] (body: what came of it, a chunked one
    decoded; an interim 100 Continue is no complete response)."""
    out, pos = [], 0
    while pos < len(buf):
        m = RESP_HEAD.match(buf, pos)
        if not m:
            if len(buf) - pos >= 12:
                out.append({"status": "garbage", "hdrs": {}, "body": b"", "complete": False})
            break
        r = {"status": m.group(1).decode(), "hdrs": {}, "body": b"", "complete": False}
        out.append(r)
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        for line in buf[pos:end].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            r["hdrs"][k.strip().lower()] = v.strip().lower()
        at, code = end + 4, int(r["status"])
        if 100 <= code < 200:  # interim (100 Continue): the real response follows
            pos, r["interim"] = at, True
            continue
        if code in (204, 304):
            pos, r["complete"] = at, True
            continue
        if b"content-length" in r["hdrs"]:
            try:
                n = int(r["hdrs"][b"content-length"])
            except ValueError:
                break
            r["body"] = buf[at:at + n]
            if len(buf) - at < n:
                break
            pos, r["complete"] = at + n, True
            continue
        if b"chunked" in r["hdrs"].get(b"transfer-encoding", b""):
            q, body = at, []
            while True:
                e = buf.find(b"\r\n", q)
                if e < 0:
                    break
                try:
                    size = int(buf[q:e].split(b";")[0], 16)
                except ValueError:
                    break
                if size == 0:
                    t = buf.find(b"\r\n\r\n", e)  # the trailers' end (none: at once)
                    if t >= 0:
                        pos, r["complete"] = t + 4, True
                    break
                if len(buf) < e + 2 + size + 2:
                    break
                body.append(buf[e + 2:e + 2 + size])
                q = e + 2 + size + 2
            r["body"] = b"".join(body)
            if r["complete"]:
                continue
            break
        r["body"] = buf[at:]
        break  # a body until the close
    return out


def bad_body(r):
    """What is wrong with a response of snug's own (JSON or server-sent events), or None."""
    ct = r["hdrs"].get(b"content-type", b"")
    try:
        if b"application/json" in ct and r["complete"]:
            o = json.loads(r["body"].decode("utf-8"))
            if int(r["status"]) >= 400 and not isinstance(o.get("error", {}).get("message"), str):
                return "an error without an OpenAI error body"
            if r["status"] == "200" and not isinstance(o, dict):
                return "not a JSON object"
        elif b"text/event-stream" in ct:
            events = r["body"].split(b"\n\n")
            for ev in events if r["complete"] else events[:-1]:
                for line in ev.split(b"\n"):
                    if line.startswith(b"data: ") and line != b"data: [DONE]":
                        json.loads(line[6:].decode("utf-8"))
                    elif line and not line.startswith((b":", b"data: ")):
                        return f"not an event line: {line[:100]!r}"
            if r["complete"] and not r["body"].endswith(b"data: [DONE]\n\n"):
                return "a stream that does not end in [DONE]"
    except UnicodeDecodeError as e:
        return f"not UTF-8: {e}"
    except (ValueError, AttributeError) as e:
        return f"not JSON: {e}"
    return None


def recv_until(s, buf, timeout, want, n, most=65536):
    """Reads (at most `most` bytes a read) until n complete responses, n events, the close or the timeout:
    (what came, appended to buf; why it stopped)."""
    why = "timeout"
    deadline = time.time() + timeout
    try:
        while True:
            left = deadline - time.time()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                c = s.recv(most)
            except socket.timeout:
                break
            if not c:
                why = "closed"
                break
            buf += c
            if want == "events" and buf.count(b"data: ") >= n:
                why = "events"
                break
            if want == "responses" and sum(r["complete"] for r in parse_responses(buf)) >= n:
                why = "responses"
                break
    except (ConnectionResetError, BrokenPipeError):
        why = "reset"
    except OSError:
        why = "error"
    return buf, why


def outcomes(buf, why):
    """A connection's outcomes: the statuses it got and the bad bodies among them, or why none came."""
    rs = parse_responses(buf)
    if not rs:
        return ["garbage" if buf else why]
    out = []
    for r in rs:
        out.append(r["status"])
        what = bad_body(r)
        if what:
            out.append(f"bad-body-{r['status']}")
            BAD_BODIES.append((r["status"], what, r["body"][:2000]))
    return out


BAD_BODIES = []  # (status, what, the body's first bytes): snug's answers that are not what they say they are


def run_script(port, ops):
    """Runs a hostile script; returns its outcomes."""
    socks, bufs, held, out = {}, collections.defaultdict(bytes), set(), []
    try:
        for op in ops:
            what = op[0]
            if what in ("open", "try_open"):
                i = op[1]
                got = BUDGET.acquire(timeout=15) if what == "open" else BUDGET.acquire(blocking=False)
                if not got:
                    out.append("no-budget")
                    continue
                held.add(i)
                try:
                    sk = socket.socket()
                    if len(op) > 2:  # a small receive buffer: a slow reader's window fills at once
                        sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, op[2])
                    sk.settimeout(10)
                    sk.connect(("127.0.0.1", port))
                    socks[i] = sk
                except OSError:
                    sk.close()
                    out.append("refused")
            elif what == "send":
                s = socks.get(op[1])
                if s is None:
                    continue
                try:
                    s.settimeout(10)
                    s.sendall(op[2])
                except (ConnectionResetError, BrokenPipeError):
                    out.append("reset-on-send")
                    socks.pop(op[1]).close()
                except OSError:
                    out.append("send-timeout")
                    socks.pop(op[1]).close()
            elif what == "sleep":
                time.sleep(op[1])
            elif what in ("recv", "drain"):
                s = socks.get(op[1])
                if s is not None:
                    bufs[op[1]], why = recv_until(s, bufs[op[1]], *op[2:])
                    if what == "recv":
                        out += outcomes(bufs[op[1]], why)
            elif what == "shutdown":
                s = socks.get(op[1])
                if s is not None:
                    try:
                        s.shutdown(socket.SHUT_WR)
                    except OSError:
                        out.append("reset-on-shutdown")
            elif what == "close":
                s = socks.pop(op[1], None)
                if s is not None:
                    if op[2]:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.close()
    finally:
        for s in socks.values():
            s.close()
        for _ in held:
            BUDGET.release()
    return out


def script_to_json(ops):
    """A script as JSON: the bytes of a send in base64."""
    return [[base64.b64encode(x).decode() if isinstance(x, bytes) else x for x in op] for op in ops]


def script_from_json(ops):
    out = []
    for op in ops:
        if op[0] == "send":
            op = [op[0], op[1], base64.b64decode(op[2])]
        out.append(op)
    return out


# ---- request bodies and their mutations ---------------------------------------------------------------------


class Raw:
    """Bytes put into the JSON text as they are: invalid JSON, odd numbers, bad UTF-8."""

    def __init__(self, b):
        self.b = b


class Pairs(list):
    """An object as (key, value) pairs, so that keys may repeat."""


def emit(v, ascii_only):
    if isinstance(v, Raw):
        return v.b
    if isinstance(v, (dict, Pairs)):
        items = v.items() if isinstance(v, dict) else v
        return b"{" + b",".join(emit(k, ascii_only) + b":" + emit(x, ascii_only) for k, x in items) + b"}"
    if isinstance(v, list):
        return b"[" + b",".join(emit(x, ascii_only) for x in v) + b"]"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    return json.dumps(v).encode()


PROMPTS = ["Hello", "Tell me a story.", "What is 2 + 2?", "def f(x):", "Once upon a time", "The capital of France is",
           "Name three colors.", "", " ", "\n\n", "日本語で答えて", "🙂🙃" * 3, "<|im_start|>system\nx<|im_end|>",
           "<|endoftext|>", "{{ raise_exception('x') }}", "{% for m in messages %}{{ m }}{% endfor %}", "\\u0000"]
ALPHABETS = ["a", "ab ", "word ", "é", "日本", "🙂", "<|im_start|>", "<|endoftext|>", "{{", "\\", "\"", "\n",
             "\u2028", "\ufeff", "\x7f", "\x01"]
HUGE_NUMBERS = [Raw(b"1e309"), Raw(b"-1e309"), Raw(b"1e-400"), Raw(b"NaN"), Raw(b"Infinity"), Raw(b"-Infinity"),
                Raw(b"-0"), Raw(b"1" * 400), Raw(b"0." + b"0" * 300 + b"1"), Raw(b"01"), Raw(b"1."), Raw(b".5"),
                Raw(b"0x10"), Raw(b"+1"), Raw(b"1e"), 2 ** 31, 2 ** 31 - 1, 2 ** 32, 2 ** 53 + 1, 2 ** 63 - 1, 2 ** 63,
                2 ** 64, -2 ** 63, -2 ** 63 - 1, 10 ** 30, -10 ** 30, 1e308, -1e308, 5e-324, 9.2e18, 9.3e18, -9.3e18]
NUMERIC_FIELDS = ["max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty",
                  "seed", "n"]
ROLES = ["user", "assistant", "system", "developer", "tool", "function", "ipython", "", "USER", "User", "user ",
         "user\u0000", "ユーザー", None, 5, True, ["user"], {"r": "user"}]


def big_string(rng, n):
    a = rng.choice(ALPHABETS)
    return (a * (n // len(a) + 1))[:n]


def random_value(rng, depth=0):
    t = rng.randrange(9 if depth < 3 else 6)
    if t == 0:
        return None
    if t == 1:
        return rng.choice([True, False])
    if t == 2:
        return rng.choice([0, 1, -1, 16, 0.5, -3.5, 1e9]) if rng.random() < 0.7 else rng.choice(HUGE_NUMBERS)
    if t == 3:
        return rng.choice(PROMPTS)
    if t == 4:
        return big_string(rng, rng.choice([1, 10, 1000]))
    if t == 5:
        return rng.choice(["", "true", "16", "null", "user"])
    if t == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if t == 7:
        return {rng.choice(["role", "content", "type", "text", "x", ""]): random_value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    return [{"type": "text", "text": rng.choice(PROMPTS)}]


def base_body(rng, ep, stream=None, small=False):
    if ep == "chat":
        msgs = [{"role": "user", "content": rng.choice(PROMPTS)}]
        if rng.random() < 0.3:
            msgs.insert(0, {"role": rng.choice(["system", "developer"]), "content": "Be terse."})
        if rng.random() < 0.2:
            msgs[-1]["content"] = [{"type": "text", "text": rng.choice(PROMPTS)},
                                   {"type": "text", "text": rng.choice(PROMPTS)}]
        b = {"messages": msgs}
    else:
        b = {"prompt": rng.choice(PROMPTS) if rng.random() < 0.8 else [rng.choice(PROMPTS)]}
    b["model"] = rng.choice(["snug", "gpt-4o", "", "smollm2"])
    if small or rng.random() < 0.8:
        b["max_tokens"] = rng.choice([1, 2, 4, 8]) if small else rng.choice([1, 2, 4, 8, 16, 32, 64, 256, 1000])
    b["temperature"] = rng.choice([0, 0, 0.3, 0.7, 1.0, 2.0])
    for k, vals in (("top_p", [0.0, 1e-9, 0.5, 0.9, 1.0]), ("top_k", [0, 1, 2, 40, 10 ** 9]),
                    ("min_p", [0.0, 0.05, 0.999, 1.0]), ("repeat_penalty", [0.01, 1.0, 1.3, 10.0]),
                    ("seed", [0, 42, -1, 9.2e18, -9.2e18]), ("cache_prompt", [True, False])):
        if rng.random() < 0.25:
            b[k] = rng.choice(vals)
    if rng.random() < 0.2:
        b["stop"] = rng.choice(["\n", " ", "e", ["."], [" is ", "Paris", "\n\n", "。"]])
    st = rng.random() < 0.3 if stream is None else stream
    if st:
        b["stream"] = True
        if rng.random() < 0.5:
            b["stream_options"] = {"include_usage": True}
    return b


def slots_of(v, out, depth=0):
    if depth > 6:
        return out
    if isinstance(v, dict):
        for k in list(v):
            out.append((v, k))
            slots_of(v[k], out, depth + 1)
    elif isinstance(v, list) and not isinstance(v, Pairs):
        for i in range(len(v)):
            out.append((v, i))
            slots_of(v[i], out, depth + 1)
    return out


def text_slot(b):
    """The container and key of the body's prompt or last message's content (or None)."""
    if isinstance(b.get("messages"), list) and b["messages"] and isinstance(b["messages"][-1], dict):
        return b["messages"][-1], "content"
    if "prompt" in b:
        return b, "prompt"
    return None


def m_wrong_type(rng, b):
    s = slots_of(b, [])
    if s:
        c, k = rng.choice(s)
        c[k] = random_value(rng)
    return b


def m_huge_number(rng, b):
    b[rng.choice(NUMERIC_FIELDS)] = rng.choice(HUGE_NUMBERS)
    return b


def m_max_tokens(rng, b):
    b[rng.choice(["max_tokens", "max_completion_tokens"])] = rng.choice(
        [-1, -3, 0, 0.5, 1.5, 1e9, 1e10, 2 ** 31, 2 ** 53 + 1, "16", None, True, [16], {}, -1e308])
    return b


def m_deep(rng, b):
    d = rng.choice([10, 100, 999, 1000, 1001, 5000, 30000])
    o, c = rng.choice([(b"[", b"]"), (b'{"a":', b"}"), (b'[{"role":"user","content":', b"}]")])
    closed = rng.random() < 0.8
    raw = Raw(o * d + b"1" + (c * d if closed else c * (d // 2)))
    s = slots_of(b, [])
    if rng.random() < 0.2 or not s:
        return raw
    cont, k = rng.choice(s)
    cont[k] = raw
    return b


def m_huge_string(rng, b):
    n = rng.choice([1000, 4000, 20000, 60000, 70000])
    t = text_slot(b)
    if t and rng.random() < 0.7:
        t[0][t[1]] = big_string(rng, n)
    else:
        s = slots_of(b, [])
        c, k = rng.choice(s) if s else (b, "x")
        c[k] = big_string(rng, n)
    return b


BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\x80", b"\xc1\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
            b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\x80", b"\xf0\x9f\x99"]
BAD_ESCAPES = [b"\\ud800", b"\\udfff", b"\\ud800\\u0041", b"\\ud83d", b"\\udc00\\ud800", b"\\u", b"\\u12", b"\\x41",
               b"\\", b"\\U0001F600", b"\\u0000"]


def m_bad_utf8(rng, b):
    parts = [rng.choice(BAD_UTF8 + BAD_ESCAPES) for _ in range(rng.randint(1, 4))]
    raw = Raw(b'"ab' + b"cd".join(parts) + (b'"' if rng.random() < 0.9 else b""))
    t = text_slot(b)
    if t and rng.random() < 0.6:
        t[0][t[1]] = raw
    elif rng.random() < 0.5:
        b[raw] = 1  # as a key
    else:
        b["stop"] = [raw]
    return b


def m_nul(rng, b):
    v = rng.choice([Raw(b'"a\x00b"'), "a\u0000b", "\u0000", Raw(b'"\x00"')])
    t = text_slot(b)
    if t:
        t[0][t[1]] = v
    if rng.random() < 0.3:
        b["stop"] = ["\u0000", "a"]
    if rng.random() < 0.2:
        return Raw(emit(b, True) + b"\x00" + rng.choice([b"", b"{}", b"garbage"]))
    return b


def m_dup(rng, b):
    items = list(b.items())
    k = rng.choice(["max_tokens", "messages", "prompt", "stream", "temperature", "stop"])
    items.append((k, random_value(rng)))
    rng.shuffle(items)
    return Pairs(items)


def m_unknown(rng, b):
    for _ in range(rng.randint(1, 6)):
        k = rng.choice(["user", "frobnicate", "logit_bias", "response_format", "tools", "tool_choice", "functions",
                        "logprobs", "top_logprobs", "echo", "best_of", "suffix", "presence_penalty", "n", "", "é",
                        big_string(rng, 3000), "__proto__", "messages\u0000"])
        b[k] = random_value(rng)
    return b


def m_stop(rng, b):
    r = rng.randrange(7)
    if r == 0:
        b["stop"] = [rng.choice(PROMPTS) or "x" for _ in range(rng.choice([5, 50, 2000]))]
    elif r == 1:
        b["stop"] = [big_string(rng, rng.choice([100, 10000])) for _ in range(rng.randint(1, 4))]
    elif r == 2:
        b["stop"] = rng.choice([[""], [None], [1], [[]], "", 5, {"a": "b"}, [], ["a", ""]])
    elif r == 3:
        b["stop"] = [rng.choice(["e", " ", "\n", "a", ".", "🙂", "<|im_end|>", "<|endoftext|>", "\u0000"])
                     for _ in range(rng.randint(1, 4))]
    elif r == 4:
        b["stop"] = rng.choice(["e", "Paris", "\n", "<|im_end|>", "\ud800"])
    elif r == 5:
        b["stop"] = ["a" * rng.randint(1, 3)] * 4
    else:  # a lone byte of a UTF-8 sequence: a stop there would cut a character in two
        b["stop"] = [Raw(b'"' + bytes([rng.choice([0x80, 0x81, 0x82, 0x99, 0xa9, 0xbf, 0xe3, 0xf0])]) + b'"')]
        t = text_slot(b)
        if t:
            t[0][t[1]] = rng.choice(["日本語で答えて", "Write a line of emoji: 🙂", "Say ü, é, ñ and ß.", "用中文回答"])
    return b


def m_roles(rng, b):
    if "messages" not in b:
        b["prompt"] = rng.choice([[], [""], ["a", "b"], [1, 2, 3], [[1, 2]], [None], "", None, {"text": "x"},
                                  [["a"]], [big_string(rng, 100)]])
        return b
    r = rng.randrange(6)
    if r == 0:
        b["messages"] = [{"role": rng.choice(ROLES), "content": rng.choice(PROMPTS)} for _ in range(rng.randint(1, 5))]
    elif r == 1:
        b["messages"] = [{"role": rng.choice(["user", "assistant"]), "content": "x"}
                         for _ in range(rng.choice([50, 500, 3000]))]
    elif r == 2:
        m = {"role": rng.choice(ROLES)}
        if rng.random() < 0.5:
            m["content"] = random_value(rng)
        if rng.random() < 0.3:
            m["name"] = random_value(rng)
        if rng.random() < 0.3:
            m["tool_calls"] = [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        b["messages"] = [m]
    elif r == 3:
        b["messages"] = rng.choice([[], {}, "hi", [None], [[]], [1], [{"content": "x"}], [{"role": "user"}],
                                    [{"role": "user", "content": None}], [{"role": "assistant", "content": "x"}],
                                    [{"role": "system", "content": "x"}]])
    elif r == 4:
        b["messages"] = [{"role": "user", "content": [rng.choice([
            {"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "http://x"}}, {"type": "text"},
            {"type": "text", "text": 5}, {"text": "x"}, "x", None, {"type": "text", "text": big_string(rng, 5000)}])
            for _ in range(rng.randint(0, 5))]}]
    else:
        b["messages"] = [{"role": "system", "content": "s"}] * rng.randint(1, 4) + [
            {"role": "user", "content": rng.choice(PROMPTS)}] + [{"role": "assistant", "content": "a"}]
    return b


def m_sampling(rng, b):
    for k, vals in (("temperature", [0, 1e-30, 2, 2.0000001, -0.0, 1e-45]), ("top_p", [0, 1e-30, 1, 1.0000001]),
                    ("top_k", [0, 1, 10 ** 9, 10 ** 9 + 1, -1]), ("min_p", [0, 1, 1e-30]),
                    ("repeat_penalty", [0.01, 0.00999, 10, 10.0001]), ("seed", [-9.2e18, 9.2e18, 0, 1.5]),
                    ("n", [1, 1.0, 2, 0]), ("logprobs", [False, True, None]), ("echo", [False, True])):
        if rng.random() < 0.4:
            b[k] = rng.choice(vals)
    return b


def m_stream(rng, b):
    b["stream"] = rng.choice([True, False, "true", 1, None, [True]])
    b["stream_options"] = rng.choice([{"include_usage": True}, {"include_usage": "yes"}, None, "x", [],
                                      {"include_usage": None}, {"x": 1}])
    return b


def m_top(rng, b):
    return rng.choice([Raw(b""), Raw(b"null"), Raw(b"[]"), Raw(b"{}"), Raw(b'"x"'), Raw(b"1"), Raw(b"[{}]"),
                       Raw(b"{" * 3), Raw(b"{\"messages\":"), Raw(b"\xef\xbb\xbf{}"), Raw(b" \t\r\n{} "),
                       Raw(b"{}{}"), Raw(b"{\"a\":1,}"), Raw(b"{'a':1}"), Raw(b"/*x*/{}"), [b], [1, 2]])


MUTATORS = [m_wrong_type, m_huge_number, m_max_tokens, m_deep, m_huge_string, m_bad_utf8, m_nul, m_dup, m_unknown,
            m_stop, m_roles, m_sampling, m_stream, m_top]


def byte_mutate(rng, data):
    d = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        r = rng.randrange(5)
        if not d:
            d += bytes([rng.randrange(256)])
        i = rng.randrange(len(d))
        if r == 0:
            d[i] = rng.randrange(256)
        elif r == 1:
            d.insert(i, rng.choice(b'{}[]",:\\\x00\xff0e-'))
        elif r == 2:
            del d[i:i + rng.randint(1, 8)]
        elif r == 3:
            d = d[:i]
        else:
            d[i:i] = d[max(0, i - 20):i]
    return bytes(d)


def mutated_body(rng, ep):
    b = base_body(rng, ep)
    if rng.random() < 0.9:
        for _ in range(rng.randint(1, 3)):
            if not isinstance(b, dict):
                break
            b = rng.choice(MUTATORS)(rng, b)
    data = emit(b, rng.random() < 0.5)
    if rng.random() < 0.2:
        data = byte_mutate(rng, data)
    return data


# ---- the hostile kinds ----------------------------------------------------------------------------------------


def http_req(method, path, body=None, headers=(), version=b"HTTP/1.1", length=True, host=True, close=False):
    def b(x):
        return x if isinstance(x, bytes) else x.encode()
    lines = [b(method) + b" " + b(path) + (b" " + b(version) if version else b"")]
    if host:
        lines.append(b"Host: 127.0.0.1")
    if body is not None:
        lines.append(b"Content-Type: application/json")
        if length:
            lines.append(b"Content-Length: " + str(len(body)).encode())
    if close:
        lines.append(b"Connection: close")
    lines += [b(h) for h in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def ep_path(rng, ep):
    return rng.choice(["/v1/chat/completions", "/chat/completions"] if ep == "chat" else
                      ["/v1/completions", "/completions"])


def valid_request(rng, stream=None, small=True, close=None):
    ep = rng.choice(["chat", "complete"])
    body = emit(base_body(rng, ep, stream=stream, small=small), True)
    return http_req("POST", ep_path(rng, ep), body, close=rng.random() < 0.5 if close is None else close)


def one_shot(data, timeout, rst=False, n=1):
    return [["open", 0], ["send", 0, data], ["recv", 0, timeout, "responses", n], ["close", 0, rst]]


def k_random_bytes(rng):
    n = rng.randint(1, rng.choice([16, 256, 4096, 20000]))
    r = rng.randrange(5)
    if r == 0:
        data = rng.randbytes(n)
    elif r == 1:
        data = bytes(rng.choice(b"GETPOST /HTTP1.\r\n:{}\" abc") for _ in range(n))
    elif r == 2:
        data = b"POST /v1/completions HTTP/1.1\r\n" + rng.randbytes(n)
    elif r == 3:
        data = rng.randbytes(n) + b"\r\n\r\n"
    else:
        data = b"\r\n" * n
    return one_shot(data, 3, rng.random() < 0.3)


def k_json(rng):
    ep = rng.choice(["chat", "complete"])
    path = ep_path(rng, ep if rng.random() < 0.9 else {"chat": "complete", "complete": "chat"}[ep])
    hdrs = [h for h in ["Accept: text/event-stream", "Expect: 100-continue", "Authorization: Bearer x",
                        "Content-Type: text/plain", "Accept-Encoding: gzip"] if rng.random() < 0.1]
    data = http_req("POST", path, mutated_body(rng, ep), hdrs, close=rng.random() < 0.5)
    return one_shot(data, rng.choice([0.5, 2, 5, 10]), rng.random() < 0.2)


def k_oversize(rng):
    size = rng.randint(MAX_BODY + 1, 4 * MAX_BODY)
    body = b'{"prompt":"' + b"x" * (size - 14) + b'"}'
    r = rng.randrange(4)
    if r == 0:  # the length said, the whole body sent
        return one_shot(http_req("POST", "/v1/completions", body), 5)
    if r == 1:  # Expect: 100-continue, so the server may refuse before the body
        head = http_req("POST", "/v1/completions", b"", ["Expect: 100-continue"])
        head = head.replace(b"Content-Length: 0", b"Content-Length: " + str(size).encode())
        return [["open", 0], ["send", 0, head], ["drain", 0, 3, "responses", 1], ["send", 0, body],
                ["recv", 0, 3, "responses", 1], ["close", 0, False]]
    if r == 2:  # chunked: refused after the limit
        step = rng.choice([1000, 4096, 32768])
        chunks = b"".join(b"%x\r\n" % len(body[i:i + step]) + body[i:i + step] + b"\r\n"
                          for i in range(0, len(body), step)) + b"0\r\n\r\n"
        head = http_req("POST", "/v1/chat/completions", b"", ["Transfer-Encoding: chunked"], length=False)
        return one_shot(head + chunks, 5)
    # a body over the limit with a Content-Length under it
    return one_shot(http_req("POST", "/v1/completions", body).replace(
        b"Content-Length: " + str(len(body)).encode(), b"Content-Length: 100"), 4, n=2)


def k_cl_lie(rng):
    ep = rng.choice(["chat", "complete"])
    body = emit(base_body(rng, ep, stream=False, small=True), True)
    req = http_req("POST", ep_path(rng, ep), body)
    cl = b"Content-Length: " + str(len(body)).encode()
    r = rng.randrange(5)
    if r == 0:
        lie = str(len(body) + rng.choice([1, 10, 1000, 60000])).encode()
    elif r == 1:
        lie = str(rng.randint(0, len(body) - 1)).encode()
    elif r == 2:
        lie = rng.choice([b"-1", b"abc", b"+5", b" 5", b"5 5", b"0x10", b"1e3", b"99999999999999999999999",
                          b"18446744073709551615", b"18446744073709551616", b"", b"-0", b"00000000000000000005",
                          b"\x00", b"5\x00", b"4294967296", b"99999999\xff", b"70000 \xe6\x97"])
    elif r == 3:
        lie = str(len(body)).encode() + b"\r\nContent-Length: " + str(rng.randint(0, 2 * len(body))).encode()
    else:
        lie = str(len(body)).encode() + b"\r\nTransfer-Encoding: chunked"
    data = req.replace(cl, b"Content-Length: " + lie, 1)
    return one_shot(data, rng.choice([1, 4]), rng.random() < 0.2, n=2)


def k_truncated(rng):
    data = valid_request(rng, small=rng.random() < 0.7)
    cut = rng.randint(1, len(data) - 1)
    return [["open", 0], ["send", 0, data[:cut]], ["sleep", rng.choice([0, 0.05, 0.5, 1.5])],
            ["close", 0, rng.random() < 0.5]]


def k_slowloris(rng):
    data = rng.choice([http_req("GET", "/health"), http_req("GET", "/metrics"), valid_request(rng, stream=False)])
    ops, t, i = [["open", 0]], 0.0, 0
    limit = rng.choice([3, 8, 12])
    while i < len(data) and t < limit:
        n = rng.randint(1, 3)
        ops.append(["send", 0, data[i:i + n]])
        i += n
        pause = rng.uniform(0.05, 0.6) if rng.random() > 0.03 else IDLE_S + rng.uniform(0.5, 1.5)
        ops.append(["sleep", round(pause, 3)])
        t += pause
    ops += [["recv", 0, 5, "responses", 1], ["close", 0, False]]
    return ops


def k_chunked(rng):
    ep = rng.choice(["chat", "complete"])
    body = emit(base_body(rng, ep, stream=False, small=True), True)
    te = rng.choice([b"chunked"] * 4 + [b"Chunked", b"gzip, chunked", b"chunked, gzip", b"identity", b"chunked\x00",
                                        b" chunked", b"chunked, chunked"])
    head = http_req("POST", ep_path(rng, ep), b"", [b"Transfer-Encoding: " + te], length=False)
    if rng.random() < 0.15:
        head = head.replace(b"Transfer-Encoding", b"Content-Length: 5\r\nTransfer-Encoding")
    k = rng.randint(1, max(1, len(body) // 2))
    pieces = [body[:k], body[k:]]
    r = rng.randrange(8)
    if r == 0:  # well-formed
        chunks = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    elif r == 1:  # a size that is no hex number, negative, or huge
        bad = rng.choice([b"zz", b"-1", b"0x10", b"FFFFFFFFFFFFFFFFFFFF", b"1" * 40, b"", b" 5", b"+5",
                          b"7fffffffffffffff", b"ffffffffffffffff", b"10000000000000000", b"5;" + b"a" * 5000, b"\x00"])
        chunks = bad + b"\r\n" + body + b"\r\n0\r\n\r\n"
    elif r == 2:  # a size larger than what follows, then nothing
        chunks = b"%x\r\n" % (len(body) + rng.choice([1, 100, 100000])) + body
    elif r == 3:  # a size smaller than what follows
        chunks = b"%x\r\n" % max(0, len(body) - rng.randint(1, 10)) + body + b"\r\n0\r\n\r\n"
    elif r == 4:  # no last chunk
        chunks = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces)
    elif r == 5:  # no CRLF after the data
        chunks = b"%x\r\n" % len(body) + body + b"0\r\n\r\n"
    elif r == 6:  # extensions and trailers
        chunks = b"".join(b"%x;name=val\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\nX-T: 1\r\n\r\n"
    else:  # many one-byte chunks
        chunks = b"".join(b"1\r\n" + body[i:i + 1] + b"\r\n" for i in range(len(body))) + b"0\r\n\r\n"
    return one_shot(head + chunks, rng.choice([1, 4]), rng.random() < 0.2)


def k_stream_vanish(rng):
    data = valid_request(rng, stream=True, small=False)
    return [["open", 0], ["send", 0, data], ["recv", 0, 30, "events", rng.randint(1, 8)],
            ["close", 0, rng.random() < 0.5]]


def k_vanish(rng):
    data = valid_request(rng, stream=False, small=False)
    return [["open", 0], ["send", 0, data], ["sleep", rng.choice([0, 0.01, 0.2, 1, 3])],
            ["close", 0, rng.random() < 0.5]]


METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "CONNECT", "get", "PoSt", "BREW",
           "PRI", "G\x00ET", "A" * 100, "GET GET", ""]
PATHS = ["/v1/chat/completions", "/v1/completions", "/chat/completions", "/completions", "/v1/models", "/models",
         "/health", "/metrics", "/", "*", "/v1", "/v1/", "//health", "/health/", "/health?x=1", "/metrics?a=b&c",
         "/metrics#frag", "/v1/chat/completions/../completions", "/%2e%2e/%2e%2e/etc/passwd", "/v1/models/smollm2",
         "http://127.0.0.1/health", "/%00", "/\x00", "/h\u00e9alth", "/v1/completions%00", "health", "",
         "/v1/chat/completions?stream=true", "/%ff%fe", "/%c3", "/" + "%E6%97%A5" * 150, "/" + "\u65e5" * 150]


def k_path_method(rng):
    method = rng.choice(METHODS)
    path = rng.choice(PATHS) if rng.random() < 0.85 else "/" + "a" * rng.choice([100, 5000, 20000, 70000])
    if rng.random() < 0.05:
        path = rng.randbytes(rng.randint(1, 50))
    version = rng.choice([b"HTTP/1.1"] * 5 + [b"HTTP/1.0", b"HTTP/2.0", b"HTTP/0.9", b"", b"HTTP/1.10", b"http/1.1",
                                              b"HTTP/1.1 x", b"HTTP/9.9"])
    body = None
    if rng.random() < 0.4:
        body = emit(base_body(rng, rng.choice(["chat", "complete"]), stream=False, small=True), True)
    data = http_req(method.encode("utf-8", "surrogatepass"), path if isinstance(path, bytes) else path.encode(),
                    body, version=version, host=rng.random() < 0.9, close=rng.random() < 0.5)
    return one_shot(data, 1.5 if method == "HEAD" else 4, rng.random() < 0.2)


def k_pipelined(rng):
    reqs = []
    for _ in range(rng.randint(2, 8)):
        r = rng.randrange(6)
        if r == 0:
            reqs.append(http_req("GET", "/health"))
        elif r == 1:
            reqs.append(http_req("GET", rng.choice(["/v1/models", "/metrics", "/nothing"])))
        elif r in (2, 3):
            ep = rng.choice(["chat", "complete"])
            b = base_body(rng, ep, stream=rng.random() < 0.2, small=True)
            b["max_tokens"] = rng.randint(1, 3)
            reqs.append(http_req("POST", ep_path(rng, ep), emit(b, True)))
        elif r == 4:
            reqs.append(http_req("POST", "/v1/completions", b"{not json"))
        else:
            reqs.append(http_req("POST", "/v1/chat/completions", mutated_body(rng, "chat")))
    if rng.random() < 0.3:
        reqs[-1] = reqs[-1].replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    data = b"".join(reqs)
    ops = [["open", 0]]
    if rng.random() < 0.5:
        ops.append(["send", 0, data])
    else:  # split at random bytes, a little apart
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 6))))
        for a, b in zip([0] + cuts, cuts + [len(data)]):
            ops += [["send", 0, data[a:b]], ["sleep", rng.choice([0, 0.01, 0.2])]]
    ops += [["recv", 0, 20, "responses", len(reqs)], ["close", 0, rng.random() < 0.2]]
    return ops


def k_idle_many(rng):
    n = rng.randint(5, 40)
    hold = rng.choice([0.5, 1, IDLE_S + 3])
    starts = [b"", b"GET /health HTTP/1.1\r\n", b"GE", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
              b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"]
    ops = []
    for i in range(n):
        ops.append(["try_open", i])
        s = rng.choice(starts)
        if s:
            ops.append(["send", i, s])
    ops.append(["sleep", hold])
    if hold > IDLE_S + 1:  # the server must have closed them by now (a full request: its answer, then closed)
        ops += [["recv", i, 0.5, "close", 0] for i in range(n)]
    ops += [["close", i, rng.random() < 0.3] for i in range(n)]
    return ops


def k_headers(rng):
    r = rng.randrange(9)
    extra = []
    if r == 0:
        extra = [b"X-Long: " + b"a" * rng.choice([8000, 100000, 300000])]
    elif r == 1:
        extra = [b"X-H%d: v" % i for i in range(rng.choice([100, 2000, 10000]))]
    elif r == 2:
        extra = [rng.choice([b"NoColon", b": novalue", b"X Space: v", b"X-Nul: a\x00b", b"\x00: x", b"X-\xff: \xfe"])]
    elif r == 3:
        extra = [b"X-Fold: a", b" continued", b"\tmore"]
    elif r == 4:
        extra = [b"Authorization: Bearer " + b"k" * rng.choice([10, 10000])]
    elif r == 5:
        extra = [b"Expect: " + rng.choice([b"100-continue", b"200-ok", b""])]
    elif r == 6:
        extra = [b"Connection: " + rng.choice([b"keep-alive, Upgrade", b"close, close", b"x" * 1000]),
                 b"Upgrade: " + rng.choice([b"websocket", b"h2c"])]
    elif r == 7:
        extra = [b"Host: a", b"Host: b"]
    data = valid_request(rng, stream=False) if rng.random() < 0.5 else http_req("GET", "/health")
    cut = data.index(b"\r\n\r\n")
    data = data[:cut] + b"".join(b"\r\n" + h for h in extra) + data[cut:]
    if r == 8:  # a bare LF or a bare CR for line ends
        data = data.replace(b"\r\n", rng.choice([b"\n", b"\r", b"\r\r\n"]))
    return one_shot(data, 4, rng.random() < 0.2)


def k_slow_reader(rng):
    data = valid_request(rng, stream=rng.random() < 0.6, small=False, close=False)
    ops = [["open", 0, rng.choice([256, 1024, 4096])], ["send", 0, data]]
    for _ in range(rng.randint(1, 12)):
        ops += [["sleep", rng.choice([0.1, 0.5, 1, IDLE_S + 1])], ["drain", 0, 0.05, "close", 0, rng.choice([1, 64])]]
    return ops + [["recv", 0, 0.05, "close", 0], ["close", 0, rng.random() < 0.5]]


def k_half_close(rng):
    data = valid_request(rng, small=True, close=rng.random() < 0.5)
    return [["open", 0], ["send", 0, data], ["shutdown", 0], ["recv", 0, 10, "responses", 1],
            ["close", 0, False]]


KINDS = {"random_bytes": k_random_bytes, "json_mutation": k_json, "oversize_body": k_oversize,
         "content_length_lie": k_cl_lie, "truncated": k_truncated, "slowloris": k_slowloris, "chunked": k_chunked,
         "stream_vanish": k_stream_vanish, "vanish": k_vanish, "path_method": k_path_method,
         "pipelined": k_pipelined, "idle_many": k_idle_many, "headers": k_headers, "slow_reader": k_slow_reader,
         "half_close": k_half_close}
WEIGHTS = {"json_mutation": 6, "random_bytes": 2, "path_method": 2, "pipelined": 2, "stream_vanish": 2}


# ---- the campaign -------------------------------------------------------------------------------------------


class Campaign:
    def __init__(self, args, srv, out):
        self.a, self.srv, self.out = args, srv, out
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.fails = []
        self.sent = collections.Counter()
        self.statuses = collections.defaultdict(collections.Counter)
        self.ring = collections.deque(maxlen=300)
        self.notable = []
        self.good = collections.Counter()
        self.good_lat = []
        self.retries = 0
        self.health = collections.Counter()
        self.scrapes = 0
        self.last_metrics = {}
        self.refs = {}

    def fail(self, what):
        with self.lock:
            self.fails.append(what)
        print(f"FAIL {what}", flush=True)

    # hostile workers
    def hostile(self, w):
        rng = random.Random(f"{self.a.seed}:{w}")
        names = list(KINDS)
        weights = [WEIGHTS.get(k, 1) for k in names]
        n = 0
        while not self.stop.is_set():
            kind = rng.choices(names, weights)[0]
            ops = KINDS[kind](rng)
            entry = {"t": round(time.time(), 3), "worker": w, "n": n, "kind": kind, "ops": ops}
            with self.lock:
                self.ring.append(entry)
            try:
                outs = run_script(self.srv.port, ops)
            except Exception as e:  # noqa: BLE001 - a bug of this script, not of the server
                self.fail(f"worker {w}: {kind} script raised {e!r}")
                outs = ["script-error"]
            with self.lock:
                self.sent[kind] += 1
                for o in outs:
                    self.statuses[kind][o] += 1
                weird = [o for o in outs if o in ("500", "504") or o.startswith("bad-body") or
                         (kind == "idle_many" and o == "timeout")]
                if weird and len(self.notable) < 40:
                    self.notable.append(dict(entry, outcomes=outs))
            if any(o.startswith("bad-body") for o in outs):
                self.fail(f"worker {w} #{n} {kind}: an answer that is not what it says it is: {BAD_BODIES[-1]}")
            n += 1

    # good clients
    def good_once(self, ep, stream):
        body = {"temperature": 0, "max_tokens": GOOD_N}
        if ep == "chat":
            body["messages"] = [{"role": "user", "content": CHAT_Q}]
        else:
            body["prompt"] = COMPLETE_Q
        if stream:
            body["stream"] = True
        path = "/v1/chat/completions" if ep == "chat" else "/v1/completions"
        t0 = time.time()
        while True:
            c = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=GOOD_TIMEOUT_S)
            try:
                c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                r = c.getresponse()
                data = r.read()
                status, retry = r.status, r.getheader("Retry-After")
            except (OSError, http.client.HTTPException) as e:  # IncompleteRead: the answer was cut off
                return None, f"{e!r} after {time.time() - t0:.1f} s", time.time() - t0
            finally:
                c.close()
            if status == 429 and time.time() - t0 < GOOD_TIMEOUT_S:
                with self.lock:
                    self.retries += 1
                time.sleep(float(retry or 1))
                continue
            break
        took = time.time() - t0
        if status != 200:
            return None, f"status {status}: {data[:300]!r}", took
        if took > GOOD_TIMEOUT_S:
            return None, f"took {took:.1f} s", took
        try:
            if not stream:
                o = json.loads(data)
                ch = o["choices"][0]
                return (ch["message"]["content"] if ep == "chat" else ch["text"]), None, took
            text, done = [], False
            for line in data.decode().split("\n"):
                if not line.startswith("data: "):
                    continue
                p = line[6:]
                if p == "[DONE]":
                    done = True
                    continue
                o = json.loads(p)
                if "error" in o:
                    return None, f"error event {p[:300]}", took
                for ch in o.get("choices", []):
                    text.append((ch.get("delta", {}).get("content") if ep == "chat" else ch.get("text")) or "")
            if not done:
                return None, f"stream without [DONE]: {data[-300:]!r}", took
            return "".join(text), None, took
        except (ValueError, KeyError, IndexError, TypeError) as e:
            return None, f"unreadable answer ({e!r}): {data[:300]!r}", took

    def good_check(self, ep, stream, what):
        text, err, took = self.good_once(ep, stream)
        key = f"{ep}{' stream' if stream else ''}"
        with self.lock:
            self.good_lat.append(took)
        if err is None and text != self.refs[ep]:
            err = f"answer {text!r}, first answer {self.refs[ep]!r}"
        with self.lock:
            self.good["ok" if err is None else "failed"] += 1
            self.good[key] += 1
        if err is not None:
            self.fail(f"good {key} {what}: {err}")
        return err is None

    def good_client(self, g):
        i = g
        while not self.stop.is_set():
            self.good_check("chat" if i % 2 == 0 else "complete", stream=g == 1, what="under load")
            i += 1

    # the monitor
    def check_metrics(self):
        st, b = self.srv.get("/metrics", timeout=10)
        if st != 200:
            self.fail(f"/metrics: status {st}")
            return None
        types, vals = {}, {}
        sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                            r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*,?\})? '
                            r'([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|NaN|[-+]?Inf)(?: -?\d+)?$')
        for line in b.decode("utf-8", "replace").split("\n"):
            if not line:
                continue
            if line.startswith("#"):
                m = re.match(r"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) ?(.*)$", line)
                if not m or (m.group(1) == "TYPE" and m.group(3) not in
                             ("counter", "gauge", "histogram", "summary", "untyped")):
                    self.fail(f"/metrics: a bad comment line {line!r}")
                    return None
                if m.group(1) == "TYPE":
                    types[m.group(2)] = m.group(3)
                continue
            m = sample.match(line)
            if not m:
                self.fail(f"/metrics: not Prometheus text: {line!r}")
                return None
            vals[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        for k, v in vals.items():
            base = re.sub(r"\{.*", "", k)
            fam = re.sub(r"_(bucket|sum|count)$", "", base)
            if types.get(base) == "counter" or (types.get(fam) == "histogram" and base != fam):
                if v < self.last_metrics.get(k, 0):
                    self.fail(f"/metrics: counter {k} went down: {self.last_metrics[k]} -> {v}")
        busy, queued = vals.get("snug_slots_busy"), vals.get("snug_queue_depth")
        if busy is None or not 0 <= busy <= self.a.parallel or queued is None or queued < 0:
            self.fail(f"/metrics: slots busy {busy}, queue depth {queued}")
        self.last_metrics = vals
        self.scrapes += 1
        return vals

    def monitor(self):
        last_scrape = 0
        while not self.stop.is_set():
            if self.srv.p.poll() is not None:
                self.fail(f"the server exited with status {self.srv.p.returncode} during the campaign")
                self.stop.set()
                return
            t0 = time.time()
            try:
                st, b = self.srv.get("/health", timeout=10)
                ok = st == 200 and json.loads(b).get("status") == "ok"
                self.health["ok" if ok else f"status {st}"] += 1
                if not ok:
                    self.fail(f"/health: {st} {b[:200]!r}")
            except (OSError, http.client.HTTPException, ValueError) as e:
                self.health["no answer"] += 1
                self.fail(f"/health: no answer ({e!r}) after {time.time() - t0:.1f} s: a hang?")
            if time.time() - last_scrape >= 5:
                last_scrape = time.time()
                try:
                    self.check_metrics()
                except (OSError, http.client.HTTPException) as e:
                    self.fail(f"/metrics: no answer ({e!r})")
            self.stop.wait(max(0.0, 1 - (time.time() - t0)))

    def dump(self, name, entries):
        path = os.path.join(self.out, name)
        with open(path, "w") as f:
            json.dump([dict(e, ops=script_to_json(e["ops"])) for e in entries], f, indent=1)
        return path


def references(snug, model, camp):
    """The good requests' answers before any hostile load: non-streamed and streamed the same, both snug
    generate's."""
    ok = True
    for ep in ("chat", "complete"):
        want = generate(snug, model, CHAT_Q if ep == "chat" else COMPLETE_Q, chat=ep == "chat")
        text, err, _ = camp.good_once(ep, False)
        if err is not None:
            camp.fail(f"good {ep} before the load: {err}")
            return False
        camp.refs[ep] = text
        if text != want:
            camp.fail(f"good {ep}: the server's answer {text!r}, snug generate's {want!r}")
            ok = False
        stext, err, _ = camp.good_once(ep, True)
        if err is not None or stext != text:
            camp.fail(f"good {ep} streamed before the load: {err or repr(stext)}, not streamed {text!r}")
            ok = False
    return ok


def outcome_table(sent, statuses):
    lines = [f"{'hostile kind':<20} {'sent':>6}  outcomes (HTTP statuses; closed / reset / timeout: no status)"]
    order = lambda kv: (not kv[0].isdigit(), kv[0])  # noqa: E731
    for k in KINDS:
        if sent[k]:
            st = " ".join(f"{s}:{n}" for s, n in sorted(statuses[k].items(), key=order))
            lines.append(f"{k:<20} {sent[k]:>6}  {st or '(no answer read: the client leaves)'}")
    lines.append(f"{'total':<20} {sum(sent.values()):>6}")
    return "\n".join(lines)


def finish(srv, camp):
    """SIGTERM: exit status 0 within 60 s, and no sanitizer report."""
    rc, took = srv.stop(60)
    if rc is None:
        camp.fail("the server did not exit within 60 s of SIGTERM")
        srv.kill()
    elif rc != 0:
        camp.fail(f"the server's exit status after SIGTERM: {rc} (under ASan: a leak?)")
    reports = srv.sanitizer_reports()
    if reports:
        camp.fail(f"sanitizer report on the server's stderr: {reports[0]}")
    return rc, took, reports


def replay(a, out):
    """Sends saved scripts, one after the other, to one fresh server; then the checks of a campaign's end."""
    entries = []
    for p in a.replay:
        with open(p) as f:
            d = json.load(f)
        entries += d if isinstance(d, list) else [d]
    srv = Server(a.snug, a.model, a.parallel, out)
    camp = Campaign(a, srv, out)
    try:
        for e in entries:
            outs = run_script(srv.port, script_from_json(e["ops"]))
            print(f"worker {e.get('worker')} #{e.get('n')} {e['kind']}: {' '.join(outs)}", flush=True)
            if any(o.startswith("bad-body") for o in outs):
                camp.fail(f"worker {e.get('worker')} #{e.get('n')} {e['kind']}: an answer that is not what it says "
                          f"it is: {BAD_BODIES[-1]}")
            if srv.p.poll() is not None:
                camp.fail(f"the server exited with status {srv.p.returncode} after worker {e.get('worker')} "
                          f"#{e.get('n')} ({e['kind']})")
                break
        if srv.p.poll() is None:
            try:
                st, _ = srv.get("/health", timeout=10)
                if st != 200:
                    camp.fail(f"/health after the replay: {st}")
            except OSError as e:
                camp.fail(f"/health after the replay: {e!r}")
        rc, took, reports = finish(srv, camp)
        print(f"replayed {len(entries)} scripts; server exit status {rc} ({took:.1f} s after SIGTERM)")
        for r in reports:
            print(r)
    finally:
        srv.kill()
    print(f"server log: {srv.log_path}")
    if camp.fails:
        print(srv.tail())
    return 1 if camp.fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snug", required=True)
    ap.add_argument("--model", default=os.path.join(os.environ.get("SNUG_MODELS") or
                                                    os.path.expanduser("~/.cache/snug/models"),
                                                    "smollm2-135m", "genai"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60, help="seconds of hostile load (default 60)")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--workers", type=int, default=8, help="hostile clients at once (default 8)")
    ap.add_argument("--out", help="folder for the server's log and saved scripts (default: a new temporary one)")
    ap.add_argument("--replay", nargs="+", metavar="JSON", help="send these saved scripts instead of a campaign")
    a = ap.parse_args()
    if not os.path.isdir(a.model):
        print(f"SKIP: {a.model} missing (tests/models/fetch_and_build.sh --preset ci builds it)")
        return 77
    r = subprocess.run([a.snug, "serve", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"SKIP: {r.stderr.strip()}")
        return 77
    out = a.out or tempfile.mkdtemp(prefix="snug-fuzz-live-")
    os.makedirs(out, exist_ok=True)
    if a.replay:
        return replay(a, out)

    t_start = time.time()
    srv = Server(a.snug, a.model, a.parallel, out)
    camp = Campaign(a, srv, out)
    rc = took = None
    reports = []
    try:
        print(f"snug serve on port {srv.port}: {' '.join(srv.cmd)}", flush=True)
        if references(a.snug, a.model, camp):
            print(f"references: chat {camp.refs['chat']!r}, completion {camp.refs['complete']!r} "
                  f"(both snug generate's)", flush=True)
        if "chat" in camp.refs and "complete" in camp.refs:
            threads = [threading.Thread(target=camp.monitor, daemon=True)]
            threads += [threading.Thread(target=camp.hostile, args=(w,), daemon=True) for w in range(a.workers)]
            threads += [threading.Thread(target=camp.good_client, args=(g,), daemon=True) for g in range(2)]
            t0 = time.time()
            for t in threads:
                t.start()
            camp.stop.wait(a.duration)
            camp.stop.set()
            for t in threads:
                t.join(120)
                if t.is_alive():
                    camp.fail(f"{t.name} did not stop within 120 s of the campaign's end")
            campaign_s = time.time() - t0
            print(f"campaign: {campaign_s:.0f} s", flush=True)
            # afterwards the slots go idle, the queue empties, and good requests still get the first answer
            if srv.p.poll() is None:
                deadline, m = time.time() + 60, None
                while time.time() < deadline:
                    try:
                        m = camp.check_metrics()
                    except (OSError, http.client.HTTPException):
                        m = None
                    if m and m.get("snug_slots_busy") == 0 and m.get("snug_queue_depth") == 0:
                        break
                    time.sleep(0.5)
                if not m or m.get("snug_slots_busy") != 0 or m.get("snug_queue_depth") != 0:
                    camp.fail(f"60 s after the load the slots are not idle: busy {m and m.get('snug_slots_busy')}, "
                              f"queued {m and m.get('snug_queue_depth')}")
                for ep in ("chat", "complete"):
                    for stream in (False, True):
                        camp.good_check(ep, stream, "after the load")
        rc, took, reports = finish(srv, camp)
    finally:
        srv.kill()

    lat = sorted(camp.good_lat) or [0]
    print(f"\nsnug serve live fuzz: seed {a.seed}, {a.duration:g} s, {a.workers} hostile workers, "
          f"--parallel {a.parallel}, {a.snug}")
    print(outcome_table(camp.sent, camp.statuses))
    print(f"good requests: {camp.good['ok']} OK, {camp.good['failed']} failed (chat {camp.good['chat']}, "
          f"chat stream {camp.good['chat stream']}, completion {camp.good['complete']}, completion stream "
          f"{camp.good['complete stream']}; 429 retries {camp.retries}); latency median {lat[len(lat) // 2]:.2f} s, "
          f"max {lat[-1]:.2f} s")
    print(f"health checks: {dict(camp.health)}; metrics scrapes: {camp.scrapes}")
    if camp.notable:
        path = camp.dump("notable.json", camp.notable)
        print(f"{len(camp.notable)} notable answers (500, 504, a bad body, an idle connection left open), "
              f"scripts in {path}:")
        for e in camp.notable[:10]:
            print(f"  worker {e['worker']} #{e['n']} {e['kind']}: {' '.join(e['outcomes'])}")
    print(f"server exit status: {rc}" + (f" ({took:.1f} s after SIGTERM)" if took is not None else "") +
          f"; sanitizer reports: {len(reports)}")
    for line in reports[:20]:
        print(f"  {line}")
    if camp.fails:
        path = camp.dump("ring.json", list(camp.ring))
        print(f"the last {len(camp.ring)} hostile scripts: {path} (fuzz_live.py --replay {path})")
        print(f"server log: {srv.log_path}\n{srv.tail()}")
    print(f"{len(camp.fails)} failure(s); {time.time() - t_start:.0f} s in all; output in {out}")
    return 1 if camp.fails else 0


if __name__ == "__main__":
    sys.exit(main())
