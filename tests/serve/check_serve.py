#!/usr/bin/env python3
"""`snug serve` against the official `openai` client and against hostile clients.

    check_serve.py --snug build/snug --model ~/.cache/snug/models/smollm2-135m/genai

1. The openai client (PyPI `openai`): chat and completion, streamed and not, at
   temperature 0: the text must be `snug generate`'s greedy answer to the same
   prompt (chat template or raw), the usage figures consistent; models.list.
2. Bad requests: a chat request to a model without a chat template, not JSON, wrong field types, n = 2, unknown path, wrong method,
   a body over --max-body, a prompt longer than the slot's context, a missing
   or wrong API key: each the HTTP status OpenAI's server gives, with a JSON
   error body.
3. Hostile clients: random bytes, a truncated body, a slow client that never
   finishes its headers (closed at --idle-timeout), a client that leaves in
   the middle of a stream (its slot is freed: the cancellation shows in
   /metrics and the slot answers the next request); meanwhile and afterwards
   good requests are answered.
   Continuous batching: five requests at once on two slots decoded together,
   each answer snug generate's; an Optimum export (no GroupQueryAttention)
   batched in a padded cache, and with --no-batch a generator per slot.
4. Seeded sampling repeats; "cache_prompt" reuses a slot's cache. A full queue answers 429 with Retry-After; SIGTERM lets the running request
   finish, refuses new ones, and the server exits with status 0 (under ASan a
   leak would make that status nonzero).
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

FAILS = []
CHECKED = [0]


def check(ok, what):
    CHECKED[0] += 1
    if not ok:
        FAILS.append(what)
        print(f"FAIL {what}", flush=True)
    return ok


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, snug, model, *args):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="snug-serve-", suffix=".log", delete=False)
        self.p = subprocess.Popen([snug, "serve", model, "--port", str(self.port), *args],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.p.poll() is not None:
                raise RuntimeError(f"snug serve exited {self.p.returncode}:\n{self.tail()}")
            try:
                st, _, _ = self.get("/health")
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"snug serve did not come up:\n{self.tail()}")

    def tail(self, n=3000):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-n:]

    def request(self, method, path, body=None, headers=None, timeout=300):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.status, dict(r.getheaders()), r.read()
        c.close()
        return out

    def get(self, path):
        return self.request("GET", path)

    def metrics(self, headers=None):
        """/metrics as {series: value}."""
        st, _, b = self.request("GET", "/metrics", headers=headers)
        vals = {}
        for line in b.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                vals[k] = float(v)
        return vals

    def stop(self, sig=signal.SIGTERM, timeout=120):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None


def generate(snug, model, prompt, n, chat=True):
    cmd = [snug, "generate", model, "-p", prompt, "--temp", "0", "-n", str(n), "--threads", "1", "-q"]
    if not chat:
        cmd.append("--no-chat")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"snug generate failed: {r.stderr}")
    return r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout


def error_body(body, status, what):
    try:
        e = json.loads(body)["error"]
        return check(isinstance(e.get("message"), str) and e["message"] and "type" in e,
                     f"{what}: {status} without an OpenAI error body: {body[:200]!r}")
    except (ValueError, KeyError, TypeError):
        return check(False, f"{what}: {status} body is not an OpenAI error: {body[:200]!r}")


def openai_part(snug, model, srv):
    import openai
    # max_retries=0: every error is seen. The server closes a connection idle for --idle-timeout
    # (2 s here); after a pause (snug generate running beside) the client is made anew, so that
    # no pooled connection the server closes just as it is reused fails a request: that race is
    # the test's, not an answer of the server's
    def client():
        return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="unused", max_retries=0,
                             timeout=300)
    cl = client()

    def gen(*args, **kw):  # snug generate, then a fresh client (above)
        nonlocal cl
        out = generate(*args, **kw)
        cl.close()
        cl = client()
        return out
    models = cl.models.list()
    check([m.id for m in models.data] == [os.path.basename(model.rstrip("/"))], f"models.list: {models}")
    chats = ["What is the capital of France? Answer in one sentence.", "Name three colors.",
             "Write a haiku about the sea."]
    n = 24
    for q in chats:
        want = gen(snug, model, q, n)
        r = cl.chat.completions.create(model="snug", messages=[{"role": "user", "content": q}], temperature=0,
                                       max_tokens=n)
        got = r.choices[0].message.content
        check(got == want, f"chat {q!r}: {got!r}, snug generate {want!r}")
        check(r.object == "chat.completion" and r.choices[0].message.role == "assistant" and
              r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens <= n and
              r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens,
              f"chat {q!r}: response fields {r}")
        pieces, finish, usage = [], None, None
        for ch in cl.chat.completions.create(model="snug", messages=[{"role": "user", "content": q}], temperature=0,
                                             max_tokens=n, stream=True, stream_options={"include_usage": True}):
            if ch.choices:
                pieces.append(ch.choices[0].delta.content or "")
                finish = ch.choices[0].finish_reason or finish
            if ch.usage:
                usage = ch.usage
        check("".join(pieces) == want, f"chat stream {q!r}: {''.join(pieces)!r}, snug generate {want!r}")
        check(finish == r.choices[0].finish_reason and usage is not None and
              usage.completion_tokens == r.usage.completion_tokens,
              f"chat stream {q!r}: finish {finish}, usage {usage} against {r.usage}")
    # a conversation with a system message and an earlier turn
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "What is 2 + 2?"}]
    r = cl.chat.completions.create(model="snug", messages=msgs, temperature=0, max_tokens=8)
    check(isinstance(r.choices[0].message.content, str) and r.usage.prompt_tokens > 20,
          f"multi-turn chat: {r}")
    for text in ["The capital of France is", "def fibonacci(n):\n"]:
        want = gen(snug, model, text, n, chat=False)
        r = cl.completions.create(model="snug", prompt=text, temperature=0, max_tokens=n)
        check(r.choices[0].text == want and r.object == "text_completion",
              f"completion {text!r}: {r.choices[0].text!r}, snug generate {want!r}")
        got = "".join(c.choices[0].text for c in cl.completions.create(model="snug", prompt=text, temperature=0,
                                                                         max_tokens=n, stream=True) if c.choices)
        check(got == want, f"completion stream {text!r}: {got!r}, snug generate {want!r}")
    # stop strings and seeded sampling
    want = gen(snug, model, chats[0], n)
    if " is " in want:
        r = cl.chat.completions.create(model="snug", messages=[{"role": "user", "content": chats[0]}], temperature=0,
                                       max_tokens=n, stop=[" is "])
        check(r.choices[0].message.content == want.split(" is ")[0] and r.choices[0].finish_reason == "stop",
              f"stop string: {r.choices[0].message.content!r} from {want!r}")
    # continuous batching: answers under way together (two slots decoding in one run, the
    # others waiting, a prompt joining while another answer decodes) are each snug generate's
    check("decoded together" in srv.tail(), f"--parallel 2 on a genai model is not batched:\n{srv.tail()}")
    jobs = [(q, True) for q in chats] + [("The capital of France is", False), ("def fibonacci(n):\n", False)]
    wants = [gen(snug, model, q, n, chat=c) for q, c in jobs]
    gots = [None] * len(jobs)

    def one(i):
        q, c = jobs[i]
        try:
            if c:
                r = cl.chat.completions.create(model="snug", messages=[{"role": "user", "content": q}],
                                               temperature=0, max_tokens=n)
                gots[i] = r.choices[0].message.content
            else:
                gots[i] = cl.completions.create(model="snug", prompt=q, temperature=0, max_tokens=n).choices[0].text
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            gots[i] = f"error: {e}"

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for i, t in enumerate(ts):
        t.start()
        time.sleep(0.05 * i)  # arrivals spread out: some join a batch under way
    for t in ts:
        t.join()
    for (q, _), got, want in zip(jobs, gots, wants):
        check(got == want, f"concurrent {q!r}: {got!r}, snug generate {want!r}")
    # a free slot below one decoding: a short answer in slot 0 (under way when the long one
    # comes, so that takes slot 1) ends first, and the long one's later steps run packed,
    # without slot 0's stand-in row; its answer is still snug generate's
    first, short_text = threading.Event(), []

    def short_answer():
        for ch in cl.chat.completions.create(model="snug", messages=[{"role": "user", "content": chats[1]}],
                                             temperature=0, max_tokens=4, stream=True):
            if ch.choices and ch.choices[0].delta.content:
                short_text.append(ch.choices[0].delta.content)
                first.set()
        first.set()

    t = threading.Thread(target=short_answer)
    t.start()
    first.wait(120)
    r = cl.chat.completions.create(model="snug", messages=[{"role": "user", "content": chats[2]}], temperature=0,
                                   max_tokens=n)
    t.join()
    check(r.choices[0].message.content == wants[2], f"after a lower slot's answer ended: "
          f"{r.choices[0].message.content!r}, snug generate {wants[2]!r}")
    check("".join(short_text) == gen(snug, model, chats[1], 4), f"the short answer: {''.join(short_text)!r}")
    # errors through the client
    try:
        cl.chat.completions.create(model="snug", messages=[{"role": "user", "content": "x"}], n=2)
        check(False, "n = 2 was accepted")
    except openai.BadRequestError as e:
        check("n" in str(e), f"n = 2: {e}")


def bad_requests(srv, ctx):
    cases = [
        ("POST", "/v1/chat/completions", b"{not json", 400, "not JSON"),
        ("POST", "/v1/chat/completions", b"", 400, "empty body"),
        ("POST", "/v1/chat/completions", {"messages": "hi"}, 400, "messages a string"),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "unknown role"),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "content a number"),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, 400,
         "temperature a string"),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": -3}, 400,
         "negative max_tokens"),
        ("POST", "/v1/completions", {"prompt": ["a", "b"]}, 400, "two prompts"),
        ("POST", "/v1/completions", {"prompt": "word " * (ctx + 50)}, 400, "a prompt longer than the context"),
        ("GET", "/v1/chat/completions", None, 405, "GET on chat"),
        ("GET", "/v2/nothing", None, 404, "unknown path"),
        # the path is quoted in the message: still UTF-8 JSON (fuzz_live found these)
        ("GET", "/%ff%fe", None, 404, "a path of bytes that are no UTF-8"),
        ("GET", "/" + "%E6%97%A5" * 150, None, 404, "a path whose quote is cut inside a character"),
        ("POST", "/v1/completions", b"x" * (70 << 10), 413, "a body over --max-body"),
    ]
    for method, path, body, want, what in cases:
        st, _, b = srv.request(method, path, body)
        check(st == want, f"{what}: status {st}, want {want}: {b[:200]!r}")
        error_body(b, st, what)
    # unknown fields are ignored, as OpenAI's server does
    st, _, b = srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0,
                                                        "frobnicate": {"x": 1}, "user": "me"})
    check(st == 200, f"unknown fields: status {st}: {b[:200]!r}")


def raw(port, data, read=True, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if read:
            out = b""
            while True:
                try:
                    c = s.recv(65536)
                except socket.timeout:
                    break
                if not c:
                    break
                out += c
            return out
    finally:
        s.close()


def good(srv, what):
    st, _, b = srv.request("POST", "/v1/completions", {"prompt": "One, two,", "max_tokens": 4, "temperature": 0})
    check(st == 200 and json.loads(b)["choices"][0]["text"], f"a good request {what}: {st} {b[:200]!r}")


def hostile(srv):
    rng = random.Random(7)
    for i in range(20):
        raw(srv.port, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000))), timeout=3)
    raw(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":", read=False)
    raw(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
        timeout=3)
    raw(srv.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 200000 + b"\r\n\r\n", timeout=3)
    good(srv, "after random bytes and truncated requests")
    # a slow client: never finishes its headers; closed at --idle-timeout (2 s here)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    good(srv, "while a slow client holds a connection")
    t0 = time.time()
    try:
        s.recv(100)  # b"" (or an error response) once the server closes it
        closed = True
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        closed = False
    check(closed and time.time() - t0 < 8, f"the idle connection was closed after {time.time() - t0:.1f} s")
    s.close()
    # a client that leaves mid-stream frees its slot
    before = srv.metrics().get("snug_requests_cancelled_total", 0)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 5000, "temperature": 0.7, "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while b"data:" not in got:
        got += s.recv(4096)
    s.close()
    deadline = time.time() + 30
    m = srv.metrics()
    while time.time() < deadline and (m.get("snug_requests_cancelled_total", 0) <= before or m["snug_slots_busy"]):
        time.sleep(0.2)
        m = srv.metrics()
    check(m.get("snug_requests_cancelled_total", 0) > before and m["snug_slots_busy"] == 0,
          f"a client that left mid-stream: cancelled {m.get('snug_requests_cancelled_total')}, "
          f"busy {m.get('snug_slots_busy')}")
    good(srv, "after a client left mid-stream")
    # the same for a non-streamed request
    before = m.get("snug_requests_cancelled_total", 0)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 5000, "temperature": 0.7}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
              b"\r\n\r\n" + body)
    time.sleep(0.5)
    s.close()
    deadline = time.time() + 30
    while time.time() < deadline and srv.metrics().get("snug_requests_cancelled_total", 0) <= before:
        time.sleep(0.2)
    check(srv.metrics().get("snug_requests_cancelled_total", 0) > before,
          "a client that left before a non-streamed answer: not cancelled")
    m = srv.metrics()
    for k in ("snug_requests_total{endpoint=\"chat\"}", "snug_generated_tokens_total", "snug_queue_depth",
              "snug_slots_total", "snug_time_to_first_token_seconds_count", "snug_http_responses_total{code=\"400\"}"):
        check(k in m, f"/metrics has no {k}")


def slot_pick(snug, model):
    """A request lands on the free slot whose cache its prompt starts with (among the lowest free
    one and those below the highest busy one: no stand-in rows for a cache hit)."""
    srv = Server(snug, model, "--parallel", "3", "--threads", "2")
    try:
        res = {}

        def ask(key, body, path="/v1/chat/completions"):
            st, _, b = srv.request("POST", path, body)
            res[key] = (st, b)
        chat = lambda q, n: {"messages": [{"role": "user", "content": q}], "max_tokens": n, "temperature": 0}
        ts = [threading.Thread(target=ask, args=("a", chat("Name a red fruit.", 48))),
              threading.Thread(target=ask, args=("b", chat("What is 12 times 7?", 48))),
              threading.Thread(target=ask, args=("long", {"prompt": "Once upon a time", "max_tokens": 1000,
                                                          "temperature": 0}, "/v1/completions"))]
        for t in ts:  # in this order: slots 0, 1, 2
            t.start()
            time.sleep(0.05)
        ts[0].join()
        ts[1].join()
        m0 = srv.metrics()
        if m0.get("snug_slots_busy", 0) < 1:
            print("slot pick: the long answer ended before the check (a fast machine); not checked")
        else:
            ask("b2", chat("What is 12 times 7?", 12))
            m1 = srv.metrics()
            pre = m1["snug_prefilled_tokens_total"] - m0["snug_prefilled_tokens_total"]
            want = generate(snug, model, "What is 12 times 7?", 12)
            got = json.loads(res["b2"][1])["choices"][0]["message"]["content"] if res["b2"][0] == 200 else res["b2"]
            check(pre == 2 and got == want, f"slot pick: {pre} tokens prefilled (2: on the slot that had it), "
                                            f"{got!r} against {want!r}")
        ts[2].join()
        check(res["long"][0] == 200, f"slot pick: the long answer: {res['long'][0]}")
        model_runs(srv)
    finally:
        check(srv.stop() == 0, f"slot pick: the server did not exit 0:\n{srv.tail()}")


def share_prompt(snug, model):
    """A prompt another slot has computed (here one whose answer is under way) is copied into the
    new request's slot, which prefills only its last two tokens, and the answer is still snug
    generate's; --no-share-prompt prefills it all."""
    story = ("Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker "
             "who")
    want = generate(snug, model, story, 12, chat=False)
    for share in (True, False):
        what = "share prompt" if share else "--no-share-prompt"
        srv = Server(snug, model, "--parallel", "2", "--threads", "2", *(() if share else ("--no-share-prompt",)))
        try:
            res = {}

            def long_one():
                res["long"] = srv.request("POST", "/v1/completions", {"prompt": story, "max_tokens": 400,
                                                                      "temperature": 0})
            t = threading.Thread(target=long_one)
            t.start()
            for _ in range(100):  # until its prompt has run (its first token out)
                time.sleep(0.02)
                if srv.metrics().get("snug_model_run_tokens_total{kind=\"decode\"}", 0) > 0:
                    break
            m0 = srv.metrics()
            st, _, b = srv.request("POST", "/v1/completions", {"prompt": story, "max_tokens": 12, "temperature": 0})
            m1 = srv.metrics()
            busy = m1.get("snug_slots_busy", 0)
            t.join()
            got = json.loads(b)["choices"][0]["text"] if st == 200 else f"status {st}"
            d = lambda k: m1[k] - m0[k]
            prompt, pre, shared = (d("snug_prompt_tokens_total"), d("snug_prefilled_tokens_total"),
                                   d("snug_shared_prompt_tokens_total"))
            if busy < 1:
                print(f"{what}: the long answer ended before the check (a fast machine); not checked")
            elif share:
                check(prompt > 20 and pre == 2 and shared == prompt - 2 and got == want,
                      f"{what}: {pre} of {prompt} prompt tokens prefilled, {shared} copied from the slot answering "
                      f"the same prompt; {got!r} against {want!r}")
            else:
                check(prompt > 20 and pre == prompt and shared == 0 and got == want,
                      f"{what}: {pre} of {prompt} prompt tokens prefilled, {shared} copied; "
                      f"{got!r} against {want!r}")
            check(res["long"][0] == 200, f"{what}: the long answer: {res['long'][0]}")
        finally:
            check(srv.stop() == 0, f"{what}: the server did not exit 0:\n{srv.tail()}")


def model_runs(srv):
    """/metrics' model runs on an idle server, around one answer: its prompt tokens the model ran in
    prompt-chunk runs, each token after the first from a decode run of its own (one answer under way),
    and time spent in both."""
    run = lambda m, what, kind: m.get(f'snug_model_run{what}_total{{kind="{kind}"}}')
    m0 = srv.metrics()
    st, _, b = srv.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Name a city."}],
                                                           "max_tokens": 7, "temperature": 0})
    m1 = srv.metrics()
    check(st == 200, f"model runs: the answer: {st} {b[:200]!r}")
    d = lambda what, kind: run(m1, what, kind) - run(m0, what, kind)
    if any(run(m, w, k) is None for m in (m0, m1) for w in ("s", "_tokens", "_seconds") for k in ("prefill", "decode")) \
            or any(run(m, w, "packed") is None for m in (m0, m1) for w in ("s", "_seconds")):
        check(False, "model runs: /metrics has no snug_model_runs_total, _run_tokens_total or _run_seconds_total "
                     "for prefill, decode and packed")
        return
    check(d("s", "packed") == 0, f"model runs: {d('s', 'packed')} packed runs for one answer alone")
    gen = m1["snug_generated_tokens_total"] - m0["snug_generated_tokens_total"]
    pre = m1["snug_prefilled_tokens_total"] - m0["snug_prefilled_tokens_total"]
    check(d("s", "prefill") >= 1 and d("_tokens", "prefill") == pre,
          f"model runs: {d('s', 'prefill')} prefill runs of {d('_tokens', 'prefill')} tokens for {pre} prefilled")
    check(gen >= 1 and d("s", "decode") == gen - 1 and d("_tokens", "decode") == gen - 1,
          f"model runs: {d('s', 'decode')} decode runs of {d('_tokens', 'decode')} tokens for {gen} generated "
          f"(the first from the prompt's run)")
    check(d("_seconds", "prefill") > 0 and (gen == 1 or d("_seconds", "decode") > 0),
          f"model runs: {d('_seconds', 'prefill')} s prefilling, {d('_seconds', 'decode')} s decoding")


def queue_and_drain(snug, model):
    srv = Server(snug, model, "--parallel", "1", "--queue", "0", "--threads", "1", "--api-key", "sekrit",
                 "--idle-timeout", "5")
    try:
        st, _, b = srv.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
        check(st == 401, f"no API key: {st}")
        error_body(b, st, "no API key")
        st, _, _ = srv.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2},
                               headers={"Authorization": "Bearer wrong"})
        check(st == 401, f"a wrong API key: {st}")
        check(srv.get("/health")[0] == 200, "/health needs no key")
        auth = {"Authorization": "Bearer sekrit"}
        # seeded sampling: the same seed, prompt and slot state give the same text (the one slot
        # answers another conversation first each time, so that the part of the prompt in its
        # cache, computed in other steps than a fresh prefill, is the same both times)
        texts = []
        for _ in range(2):
            srv.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello there"}],
                                                         "max_tokens": 4, "temperature": 0}, headers=auth)
            st, _, b = srv.request("POST", "/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": "Write a haiku about the sea."}],
                                    "temperature": 1.0, "top_p": 0.9, "seed": 42, "max_tokens": 16}, headers=auth)
            texts.append(json.loads(b)["choices"][0]["message"]["content"] if st == 200 else f"status {st}")
        check(texts[0] == texts[1], f"seeded sampling differs: {texts}")
        # by default a slot keeps its prompt's rows: the same question again prefills its last two
        # tokens only (one alone would be a decode row), a new one all but the template's first
        # tokens, and both answers are still snug generate's
        ms, got = [], []
        for q in ("Why is the sky blue?", "Why is the sky blue?", "Name a red fruit."):
            st, _, b = srv.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": q}],
                                                                    "max_tokens": 12, "temperature": 0}, headers=auth)
            got.append(json.loads(b)["choices"][0]["message"]["content"] if st == 200 else f"status {st}")
            ms.append(srv.metrics(auth))
        for i, q in enumerate(("Why is the sky blue?", "Name a red fruit.")):
            want = generate(snug, model, q, 12)
            check(got[2 * i] == want and got[1] == got[0], f"cached prompt rows: {got} against {want!r}")
        pre = [ms[i]["snug_prefilled_tokens_total"] - ms[i - 1]["snug_prefilled_tokens_total"] for i in (1, 2)]
        prompt = [ms[i]["snug_prompt_tokens_total"] - ms[i - 1]["snug_prompt_tokens_total"] for i in (1, 2)]
        check(pre[0] == 2 and 2 < pre[1] < prompt[1], f"cached prompt rows: {pre} of {prompt} prompt tokens prefilled")
        # "cache_prompt": the second of two requests with the same conversation prefills only its last two tokens
        ms = []
        for _ in range(2):
            srv.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Count to three."}],
                                                         "max_tokens": 4, "temperature": 0, "cache_prompt": True},
                        headers=auth)
            ms.append(srv.metrics(auth))
        prompt = ms[1]["snug_prompt_tokens_total"] - ms[0]["snug_prompt_tokens_total"]
        pre = ms[1]["snug_prefilled_tokens_total"] - ms[0]["snug_prefilled_tokens_total"]
        check(prompt > 2 and pre == 2, f"cache_prompt: {pre} of {prompt} prompt tokens prefilled the second time")
        res = {}

        def long_one():
            try:
                res["long"] = srv.request("POST", "/v1/completions",
                                          {"prompt": "Once upon a time", "max_tokens": 48, "temperature": 0},
                                          headers=auth)
            except OSError as e:
                res["long"] = (None, {}, repr(e).encode())
        t = threading.Thread(target=long_one)
        t.start()
        deadline = time.time() + 30
        while time.time() < deadline and not srv.metrics(auth).get("snug_slots_busy"):
            time.sleep(0.05)
        st, h, b = srv.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, headers=auth)
        check(st == 429 and "Retry-After" in h, f"a full queue: {st} {h}")
        srv.p.send_signal(signal.SIGTERM)  # the running request finishes; new ones are refused
        time.sleep(0.3)
        try:
            st, _, _ = srv.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, headers=auth,
                                   timeout=10)
            check(st == 503, f"a request while draining: {st}")
        except OSError:
            pass  # the listening socket may already be closed
        t.join(120)
        st, _, b = res.get("long", (None, None, b""))
        check(st == 200 and json.loads(b)["usage"]["completion_tokens"] > 0,
              f"the request running at SIGTERM: {st} {b[:200]!r}")
        rc = srv.stop(timeout=60)
        check(rc == 0, f"exit status after SIGTERM: {rc}\n{srv.tail()}")
    finally:
        srv.stop(signal.SIGKILL, 10)


def optimum(snug, model):
    """An Optimum export (attention masked by attention_mask, no GroupQueryAttention): its slots decode
    together in a padded cache, and with --no-batch get a generator each; both answer as snug generate
    does (one request at a time: no other row pads this one's)."""
    opt = os.path.join(os.path.dirname(model.rstrip("/")), "optimum")
    if not os.path.isdir(opt):
        check(False, f"{opt} missing")
        return
    prompt = "The capital of France is"
    want = generate(snug, opt, prompt, 8, chat=False)
    for extra, said in (((), "decoded together"), (("--no-batch",), "a generator per slot")):
        srv = Server(snug, opt, "--parallel", "2", "--threads", "1", "--ctx", "256", *extra)
        try:
            check(said in srv.tail(), f"optimum --parallel 2 {extra}: no '{said}':\n{srv.tail()}")
            st, _, b = srv.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0})
            got = json.loads(b)["choices"][0]["text"] if st == 200 else f"status {st}"
            check(got == want, f"optimum completion {extra}: {got!r}, snug generate {want!r}")
            check(srv.stop() == 0, f"optimum server's exit status {extra}\n{srv.tail()}")
        finally:
            srv.stop(signal.SIGKILL, 10)


def late_tokens(snug, model):
    """A stream whose next token comes later than --idle-timeout (a long prompt prefilling between two
    of its decode steps) is kept open by SSE comments and ends with [DONE] (fuzz_live found it cut)."""
    srv = Server(snug, model, "--parallel", "2", "--ctx", "2048", "--batch", "512", "--threads", "1",
                 "--idle-timeout", "1")
    try:
        body = json.dumps({"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 12,
                           "temperature": 0, "stream": True}).encode()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=120)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        got, started, th = b"", False, None
        while not got.endswith(b"0\r\n\r\n"):
            c = s.recv(65536)
            if not c:
                break
            got += c
            if not started and b"data: " in got:
                started = True
                th = threading.Thread(target=srv.request, args=("POST", "/v1/completions",
                                      {"prompt": "word " * 1800, "max_tokens": 1, "temperature": 0}), daemon=True)
                th.start()
        s.close()
        if th:
            th.join(120)
        check(b"data: [DONE]" in got, f"a stream with late tokens was cut: {got[-300:]!r}")
        check(b": keep-alive" in got, "a stream silent past half --idle-timeout got no SSE comment")
        check(srv.stop() == 0, f"exit status\n{srv.tail()}")
    finally:
        srv.stop(signal.SIGKILL, 10)


def no_template(snug, model):
    """A folder without a chat template: chat requests are a 400 that says so, raw text still works."""
    with tempfile.TemporaryDirectory() as d:
        for f in os.listdir(model):
            if f == "chat_template.jinja":
                continue
            if f == "tokenizer_config.json":
                with open(os.path.join(model, f)) as fh:
                    cfg = json.load(fh)
                cfg.pop("chat_template", None)
                with open(os.path.join(d, f), "w") as fh:
                    json.dump(cfg, fh)
            else:
                os.symlink(os.path.join(os.path.abspath(model), f), os.path.join(d, f))
        srv = Server(snug, d, "--threads", "1")
        try:
            st, _, b = srv.request("POST", "/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
            check(st == 400 and b"chat template" in b, f"chat without a template: {st} {b[:200]!r}")
            error_body(b, st, "chat without a template")
            good(srv, "on a model without a chat template")
            check(srv.stop() == 0, f"exit status after SIGTERM (no template)\n{srv.tail()}")
        finally:
            srv.stop(signal.SIGKILL, 10)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snug", required=True)
    ap.add_argument("--model", default=os.path.join(os.environ.get("SNUG_MODELS") or os.path.expanduser("~/.cache/snug/models"), "smollm2-135m", "genai"))
    a = ap.parse_args()
    if not os.path.isdir(a.model):
        print(f"SKIP: {a.model} missing (tests/models/fetch_and_build.sh --preset ci builds it)")
        return 77
    r = subprocess.run([a.snug, "serve", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"SKIP: {r.stderr.strip()}")
        return 77
    ctx = 512
    srv = Server(a.snug, a.model, "--parallel", "2", "--threads", "1", "--ctx", str(ctx), "--max-body", "64K",
                 "--idle-timeout", "2")
    try:
        openai_part(a.snug, a.model, srv)
        bad_requests(srv, ctx)
        hostile(srv)
        rc = srv.stop()
        check(rc == 0, f"exit status after SIGTERM: {rc}\n{srv.tail()}")
    finally:
        srv.stop(signal.SIGKILL, 10)
    slot_pick(a.snug, a.model)
    share_prompt(a.snug, a.model)
    queue_and_drain(a.snug, a.model)
    optimum(a.snug, a.model)
    late_tokens(a.snug, a.model)
    no_template(a.snug, a.model)
    print(f"snug serve: {CHECKED[0]} checks, {len(FAILS)} failed")
    if FAILS:
        print(srv.tail())
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
