# SPDX-License-Identifier: Apache-2.0
"""A torchrun-style launcher for the tests: starts N copies of a command on
this host with the variables torchrun gives its workers (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT
= a free port) and without meshccl-run's (NCCL_COMM_ID, MESHCCL_RUN), so that
init_method env:// and the backend's unique-id exchange through the store are
what is tested. Output lines are prefixed "[rank] ". When a rank fails the
others are killed; the whole job is killed after --timeout seconds.

Usage: launch_env.py -n N [--timeout S] -- command args...
Exit status: 0 if every rank exited 0, else the first failing rank's status.

(Debian's torchrun 1.13 under Python 3.11 fails in its own --redirects
handling unless given --redirects 2 --tee 2: this launcher needs no torch.)
"""
import argparse
import os
import selectors
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")
    port = free_port()
    procs = []
    for r in range(a.n):
        env = dict(os.environ)
        for k in ("NCCL_COMM_ID", "MESHCCL_RUN"):
            env.pop(k, None)
        env.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.n), LOCAL_WORLD_SIZE=str(a.n),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True))
    sel = selectors.DefaultSelector()
    for r, p in enumerate(procs):
        sel.register(p.stdout, selectors.EVENT_READ, r)
    pending = {r: b"" for r in range(a.n)}
    deadline = time.monotonic() + a.timeout
    first_fail = None
    open_streams = a.n
    while open_streams > 0:
        left = deadline - time.monotonic()
        if left <= 0:
            print("launch_env: job still running after %.0f s: killing it" % a.timeout, file=sys.stderr)
            first_fail = first_fail if first_fail is not None else (-1, 124)
            break
        for key, _ in sel.select(timeout=min(left, 0.5)):
            r = key.data
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                sel.unregister(key.fileobj)
                open_streams -= 1
                if pending[r]:
                    sys.stdout.write("[%d] %s\n" % (r, pending[r].decode(errors="replace")))
                continue
            lines = (pending[r] + data).split(b"\n")
            pending[r] = lines.pop()
            for line in lines:
                sys.stdout.write("[%d] %s\n" % (r, line.decode(errors="replace")))
            sys.stdout.flush()
        for r, p in enumerate(procs):
            if first_fail is None and p.poll() not in (None, 0):
                first_fail = (r, p.returncode)
                print("launch_env: rank %d exited with status %d; stopping the others" % (r, p.returncode),
                      file=sys.stderr)
                for q in procs:
                    if q.poll() is None:
                        os.killpg(q.pid, signal.SIGTERM)
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
    for r, p in enumerate(procs):
        if first_fail is None and p.returncode != 0:
            first_fail = (r, p.returncode)
    if first_fail is None:
        return 0
    code = first_fail[1]
    return code if 0 < code < 256 else 1


if __name__ == "__main__":
    sys.exit(main())
