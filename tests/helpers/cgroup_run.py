#!/usr/bin/env python3
"""Run a command under a real memory limit, as on a small device.

The command runs inside a fresh memory cgroup (v1: memory.limit_in_bytes,
with memory.memsw.limit_in_bytes where swap accounting exists; v2:
memory.max and memory.swap.max = 0), so its RSS and the page cache it fills
are capped together: what a mapped model file holds counts, and the kernel
reclaims it under the limit. After it ends, prints one JSON object:

  limit_bytes   the limit
  peak_bytes    the cgroup's peak usage (v1 memory.max_usage_in_bytes,
                v2 memory.peak)
  oom_kills     processes the OOM killer killed in the cgroup
  rc, signal    the command's exit status (signal: the one that killed it)
  wall_s        its wall time
  read_bytes    bytes it read from block devices (getrusage ru_inblock x 512)
  cgroup        "v1" or "v2"

  tests/helpers/cgroup_run.py --limit 512M [--json FILE] -- CMD ARGS...

Needs root and a writable cgroup hierarchy; `--check` exits 0 when the
machine can do it, 77 otherwise (CTest's skip code). Import it for run().
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

V1 = "/sys/fs/cgroup/memory"
V2 = "/sys/fs/cgroup"


def parse_size(s):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", s)
    if not m:
        raise ValueError(f"not a size: {s!r}")
    mul = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * mul)


def _kind():
    if os.path.isfile(os.path.join(V1, "memory.limit_in_bytes")):
        return "v1"
    if os.path.isfile(os.path.join(V2, "cgroup.controllers")):
        with open(os.path.join(V2, "cgroup.controllers")) as f:
            if "memory" in f.read().split():
                return "v2"
    return None


def available():
    """Why a cgroup cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return "not root"
    kind = _kind()
    if not kind:
        return "no memory cgroup hierarchy (v1 or v2) mounted"
    base = V1 if kind == "v1" else V2
    probe = os.path.join(base, f"snug-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as e:
        return f"cannot create a cgroup under {base}: {e.strerror}"
    return None


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def run(cmd, limit, stdout=None, stderr=None, env=None, timeout=None):
    """Runs cmd (a list) under a memory limit of `limit` bytes; returns the
    figures above as a dict. stdout/stderr as for subprocess.Popen."""
    why = available()
    if why:
        raise RuntimeError(f"cgroup_run: {why}")
    kind = _kind()
    base = V1 if kind == "v1" else V2
    cg = os.path.join(base, f"snug-run-{os.getpid()}-{int(time.time() * 1e6) % 1000000}")
    os.mkdir(cg)
    try:
        if kind == "v1":
            _write(os.path.join(cg, "memory.limit_in_bytes"), limit)
            memsw = os.path.join(cg, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):  # no swapping out of the limit either
                try:
                    _write(memsw, limit)
                except OSError:
                    pass
        else:
            _write(os.path.join(cg, "memory.max"), limit)
            if os.path.exists(os.path.join(cg, "memory.swap.max")):
                _write(os.path.join(cg, "memory.swap.max"), 0)
        procs = os.path.join(cg, "cgroup.procs")

        def enter():  # in the child, before exec: join the cgroup
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, preexec_fn=enter)
        try:
            _, status, ru = os.wait4(p.pid, 0) if timeout is None else _wait_timeout(p, timeout)
        finally:
            p.returncode = 0  # reaped by wait4 above
        wall = time.time() - t0
        sig = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if kind == "v1":
            peak = int(_read(os.path.join(cg, "memory.max_usage_in_bytes"), "0"))
            oc = _read(os.path.join(cg, "memory.oom_control"), "")
            m = re.search(r"oom_kill (\d+)", oc)
            kills = int(m.group(1)) if m else (1 if sig == -signal.SIGKILL else 0)
        else:
            peak = int(_read(os.path.join(cg, "memory.peak"), "0") or 0)
            ev = _read(os.path.join(cg, "memory.events"), "")
            m = re.search(r"oom_kill (\d+)", ev)
            kills = int(m.group(1)) if m else 0
        return {"limit_bytes": limit, "peak_bytes": peak, "oom_kills": kills, "rc": rc,
                "signal": -sig if sig else 0, "wall_s": round(wall, 3),
                "read_bytes": ru.ru_inblock * 512, "cgroup": kind}
    finally:
        for _ in range(50):  # the cgroup goes once its last task has
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.05)


def _wait_timeout(p, timeout):
    end = time.time() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            return pid, status, ru
        if time.time() > end:
            p.kill()
            return os.wait4(p.pid, 0)
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", help="memory limit (512M, 1.5G, bytes)")
    ap.add_argument("--json", help="write the figures here instead of stderr")
    ap.add_argument("--check", action="store_true", help="exit 0 if a cgroup can be made here, 77 if not")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.check:
        why = available()
        if why:
            print(f"cgroup_run: {why}", file=sys.stderr)
        sys.exit(77 if why else 0)
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not a.limit or not cmd:
        ap.error("--limit and a command are required")
    try:
        r = run(cmd, parse_size(a.limit))
    except (RuntimeError, ValueError) as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    out = json.dumps(r)
    if a.json:
        with open(a.json, "w") as f:
            f.write(out + "\n")
    else:
        print(out, file=sys.stderr)
    sys.exit(r["rc"])


if __name__ == "__main__":
    main()
