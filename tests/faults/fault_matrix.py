#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fault matrix (`make faults`; docs/TOOLS.md, "make faults").

One job per row: N ranks of tests/mp/mp_net_timeout (back-to-back checked
all-reduces of 1 MiB) over one transport, and one fault on the last rank (or
its host) at one stage:

  fault      kill (SIGKILL), stop (SIGSTOP, kept stopped until the row ends,
             longer than MESHCCL_NET_TIMEOUT), cut (the switch port of the
             victim's namespace host goes down; namespace hosts only), abort
             (mid-coll only: SIGUSR1 makes another thread of the victim call
             ncclCommAbort while its all-reduces run; the victim must return
             too, so it counts among the survivors)
  stage      pre-boot (before it registers with the bootstrap root), post-boot
             (bootstrap ring up, before the allgather of peer information),
             connect (transport set-up, between its two rounds), mid-coll
             (every rank has completed an all-reduce)
  transport  P2P, SHM, NET (Socket over loopback), netns (two ranks per
             namespace host on a bridge, one per host at 2 ranks; NET between
             hosts, P2P inside), containers (every rank in its own PID
             namespace, `unshare --pid --fork --mount-proc`, sharing the
             network and /dev/shm, as Docker's --ipc=host --net=host: the
             ranks are one host but no pid of a peer means anything; root)

The init stages come from the library's MESHCCL_FAULT_INIT hook (the victim
kills or stops itself there; for a cut it stops, the port goes down, and it
is continued). Columns: the slowest survivor's time from the fault to its
exit (a survivor is every rank but a killed or stopped victim; with a cut,
every rank), the first survivor's error, whether any survivor was still
running at the row's limit (hang: it was then killed), and the /dev/shm
segments left whose creator is gone (removed afterwards).

Nothing here can hang: every process is killed at its row's limit, and the
namespaces (prefix mcf<pid>) are removed on any exit. Traffic goes only to
loopback and to addresses inside those namespaces; the Mesh net is pinned
to loopback (MESHCCL_MESH_IFNAME=lo) outside them.

  fault_matrix.py BUILD [--quick] [--ranks 2,4,8,16] [--transports P2P,SHM,NET,netns]
                        [--faults kill,stop,cut] [--stages pre-boot,post-boot,connect,mid-coll]
Exit status: 0 when no row hung and nothing was left in /dev/shm, 1 otherwise.
"""
import argparse
import atexit
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time

NET_TIMEOUT_S = 3  # MESHCCL_NET_TIMEOUT of every row
INIT_TIMEOUT_S = 5  # MESHCCL_INIT_TIMEOUT (and MESHCCL_BOOTSTRAP_TIMEOUT)
START_LIMIT_S = 30  # for every rank to start its all-reduces (mid-coll rows)
REPORT_LIMIT_S = 12  # after the fault, for every survivor to exit: beyond is a hang
COUNT = 262144  # floats per all-reduce (1 MiB)
STAGE_HOOK = {"pre-boot": "bootstrap", "post-boot": "peers", "connect": "connect"}
TRANSPORT_ENV = {
    "P2P": {"MESHCCL_P2P_CMA": "1"},  # true P2P between processes (cross-memory attach)
    "SHM": {"NCCL_P2P_DISABLE": "1"},
    "NET": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket"},
    "netns": {"NCCL_NET": "Socket"},
    "containers": {},
}
NEEDS_ROOT = ("netns", "containers")
UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]


def log(msg):
    print(msg, flush=True)


class Hosts:
    """Namespace hosts mcf<pid>h1..hN on a bridge in mcf<pid>sw."""

    def __init__(self, n):
        self.tag = "mcf%d" % os.getpid()
        self.sub = "10.209.%d" % (os.getpid() % 200 + 20)
        self.sw = self.tag + "sw"
        self.ns = []
        self.n = n
        atexit.register(self.remove)
        self.ip("netns", "add", self.sw)
        self.ip("-n", self.sw, "link", "add", "br0", "type", "bridge")
        self.ip("-n", self.sw, "link", "set", "br0", "up")
        for i in range(1, n + 1):
            h = "%sh%d" % (self.tag, i)
            self.ip("netns", "add", h)
            self.ns.append(h)
            self.ip("link", "add", "%sa%d" % (self.tag, i), "type", "veth", "peer", "name",
                    "%sb%d" % (self.tag, i))
            self.ip("link", "set", "%sa%d" % (self.tag, i), "netns", h, "name", "mcv0")
            self.ip("link", "set", "%sb%d" % (self.tag, i), "netns", self.sw)
            self.ip("-n", self.sw, "link", "set", "%sb%d" % (self.tag, i), "master", "br0", "up")
            self.ip("-n", h, "addr", "add", "%s.%d/24" % (self.sub, i), "dev", "mcv0")
            self.ip("-n", h, "link", "set", "mcv0", "up")
            self.ip("-n", h, "link", "set", "lo", "up")

    @staticmethod
    def ip(*args):
        subprocess.run(["ip"] + list(args), check=True, timeout=20)

    def port(self, host, up):
        self.ip("-n", self.sw, "link", "set", "%sb%d" % (self.tag, host), "up" if up else "down")

    def remove(self):
        for n in self.ns + [self.sw]:
            try:
                pids = subprocess.run(["ip", "netns", "pids", n], capture_output=True,
                                      timeout=20).stdout.split()
                for p in pids:
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", n], capture_output=True, timeout=20)
            except subprocess.SubprocessError:
                pass
        self.ns = []


def free_port():
    for _ in range(200):
        p = random.randrange(12000, 28000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            pass
        finally:
            s.close()
    raise RuntimeError("no free port")


def proc_state(pid):
    """'T' stopped, 'Z' or None gone, else the state letter."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def shm_segments():
    return {f for f in os.listdir("/dev/shm") if f.startswith("meshccl-")}


def orphans(before, own):
    """Segments that appeared since `before` whose creator is gone. `own`: the
    pids of the row's processes (segment names end in the creator's pid), so
    that another job's on this host (tests run side by side) is not counted;
    None (ranks in their own PID namespace name themselves by pids of that
    namespace): every one."""
    out = []
    for f in shm_segments() - before:
        pid = f.rsplit("-", 1)[-1]
        if own is not None and pid not in own:
            continue
        if pid.isdigit() and proc_state(int(pid)) in (None, "Z"):
            out.append(f)
    return out


def rank_pid(transport, proc):
    """The pid of the rank's own process: in a container, unshare's child."""
    if transport != "containers":
        return proc.pid
    try:
        with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
            kids = f.read().split()
        return int(kids[0]) if kids else proc.pid
    except OSError:
        return proc.pid


def layout(transport, n):
    """Host (1-based) of each rank: None on loopback."""
    if transport != "netns":
        return [None] * n
    per = 1 if n == 2 else 2
    return [r // per + 1 for r in range(n)]


def run_row(build, hosts, fault, stage, n, transport):
    prog = os.path.join(build, "tests", "mp_net_timeout")
    where = layout(transport, n)
    victim = n - 1
    port = free_port()
    secret = "%032x" % random.getrandbits(128)
    before = shm_segments()
    out_dir = os.path.join(build, "faults")
    os.makedirs(out_dir, exist_ok=True)
    procs = []
    files = []
    for r in range(n):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("NCCL_", "MESHCCL_", "OMPI_", "SLURM_"))}
        env.update({"RANK": str(r), "WORLD_SIZE": str(n), "MESHCCL_SECRET": secret,
                    "MESHCCL_NET_TIMEOUT": str(NET_TIMEOUT_S),
                    "MESHCCL_INIT_TIMEOUT": str(INIT_TIMEOUT_S),
                    "MESHCCL_BOOTSTRAP_TIMEOUT": str(INIT_TIMEOUT_S), "MESHCCL_MESH_AUTO": "0",
                    "MESHCCL_MESH_IFNAME": "lo"})
        env.update(TRANSPORT_ENV[transport])
        cmd = [prog, "0", str(COUNT)]
        if where[r] is None:
            env.update({"NCCL_SOCKET_IFNAME": "lo", "NCCL_COMM_ID": "127.0.0.1:%d" % port,
                        "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n)})
        else:
            mates = [k for k in range(n) if where[k] == where[r]]
            env.update({"NCCL_SOCKET_IFNAME": "mcv0", "NCCL_HOSTID": "host%d" % where[r],
                        "NCCL_COMM_ID": "%s.%d:%d" % (hosts.sub, where[0], port),
                        "LOCAL_RANK": str(mates.index(r)), "LOCAL_WORLD_SIZE": str(len(mates))})
            env.pop("MESHCCL_MESH_IFNAME")  # inside a namespace: its own interfaces only
            cmd = ["ip", "netns", "exec", hosts.ns[where[r] - 1]] + cmd
        if transport == "containers":
            cmd = UNSHARE + cmd
        if (r == victim) and (stage in STAGE_HOOK):
            action = "kill" if fault == "kill" else "stop"
            env["MESHCCL_FAULT_INIT"] = "%s:%s" % (STAGE_HOOK[stage], action)
        f = open(os.path.join(out_dir, "rank%d.out" % r), "w+")
        files.append(f)
        procs.append(subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT))
    exit_at = [None] * n
    t_fault = None
    hang = False
    cut_host = None

    def reap():
        t = time.time()  # one reading for all: a victim seen with its survivors is not later
        for r, p in enumerate(procs):
            if (exit_at[r] is None) and (p.poll() is not None):
                exit_at[r] = t

    try:
        # The fault.
        deadline = time.time() + START_LIMIT_S
        while (t_fault is None) and (time.time() < deadline):
            reap()
            if stage in STAGE_HOOK:
                st = proc_state(rank_pid(transport, procs[victim]))
                if (fault == "kill") and (exit_at[victim] is not None):
                    t_fault = exit_at[victim]
                elif (fault != "kill") and (st == "T"):
                    t_fault = time.time()
                    if fault == "cut":
                        cut_host = where[victim]
                        hosts.port(cut_host, False)
                        os.kill(rank_pid(transport, procs[victim]), signal.SIGCONT)
                elif exit_at[victim] is not None:
                    break  # it never reached the stage
            else:
                running = 0
                for f in files:
                    f.seek(0)
                    running += ": running" in f.read()
                if running == n:
                    time.sleep(0.3)
                    t_fault = time.time()
                    if fault == "cut":
                        cut_host = where[victim]
                        hosts.port(cut_host, False)
                    else:
                        sig = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP,
                               "abort": signal.SIGUSR1}[fault]
                        os.kill(rank_pid(transport, procs[victim]), sig)
                elif any(e is not None for e in exit_at):
                    break
            time.sleep(0.01)
        survivors = [r for r in range(n) if (fault in ("cut", "abort")) or (r != victim)]
        if t_fault is not None:
            deadline = t_fault + REPORT_LIMIT_S
            while time.time() < deadline:
                reap()
                if all(exit_at[r] is not None for r in survivors):
                    break
                time.sleep(0.01)
            reap()
            hang = any(exit_at[r] is None for r in survivors)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()
        if cut_host is not None:
            hosts.port(cut_host, True)
    texts = []
    for f in files:
        f.seek(0)
        texts.append(f.read())
        f.close()
    left = orphans(before, None if transport == "containers" else {str(p.pid) for p in procs})
    for seg in left:
        try:
            os.unlink(os.path.join("/dev/shm", seg))
        except OSError:
            pass
    if t_fault is None:
        return {"time": "-", "said": "fault not injected: " + first_line(texts, range(n)),
                "hang": "n/a", "shm": len(left)}
    times = [exit_at[r] - t_fault for r in survivors if exit_at[r] is not None]
    peers = [r for r in survivors if r != victim]  # what the victim's peers said
    said = first_line(texts, peers if fault == "abort" else survivors)
    if fault == "abort":
        said += " / victim: " + first_line(texts, [victim])
    return {"time": "%.1f s" % max(times) if times else "-", "said": said,
            "hang": "yes" if hang else "no", "shm": len(left)}


def first_line(texts, ranks):
    """The error of the first rank (in rank order) that printed one, shortened."""
    for r in ranks:
        for line in texts[r].splitlines():
            m = re.match(r"^rank \S+: (init failed: .*|.* after \d+ all-reduces .*?\): (.*))$", line)
            if m:
                said = m.group(2) if m.group(2) else m.group(1)
                said = re.sub(r"\(host [^ ]+ pid \d+\)", "(pid)", said)
                said = re.sub(r"<\d+>", "", said)
                return said[:110]
    return "(nothing)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--ranks", default="2,4,8,16")
    ap.add_argument("--transports", default="P2P,SHM,NET,netns,containers")
    ap.add_argument("--faults", default="kill,stop,cut,abort")
    ap.add_argument("--stages", default="pre-boot,post-boot,connect,mid-coll")
    ap.add_argument("--quick", action="store_true",
                    help="the rows of tests/mp/test_fault_matrix.sh (make test): a kill mid-coll "
                    "on P2P, a kill at connect on SHM, a stop mid-coll on SHM and NET, a stop "
                    "post-boot on P2P, an abort mid-coll on SHM and NET, a kill mid-coll in "
                    "containers")
    a = ap.parse_args()
    if not os.access(os.path.join(a.build, "tests", "mp_net_timeout"), os.X_OK):
        sys.exit("fault_matrix: %s/tests/mp_net_timeout not built" % a.build)
    rows = []
    if a.quick:
        rows = [("kill", "mid-coll", 4, "P2P"), ("kill", "connect", 4, "SHM"),
                ("stop", "mid-coll", 2, "SHM"), ("stop", "mid-coll", 2, "NET"),
                ("stop", "post-boot", 2, "P2P"), ("abort", "mid-coll", 4, "SHM"),
                ("abort", "mid-coll", 2, "NET"), ("kill", "mid-coll", 2, "containers")]
    else:
        for t in a.transports.split(","):
            for fault in a.faults.split(","):
                if (fault == "cut") and (t != "netns"):
                    continue  # a link cut needs namespace hosts
                for stage in a.stages.split(","):
                    if (fault == "abort") and (stage != "mid-coll"):
                        continue  # an abort needs a communicator
                    for n in [int(x) for x in a.ranks.split(",")]:
                        rows.append((fault, stage, n, t))
    hosts = None
    if any(r[3] in NEEDS_ROOT for r in rows) and (os.geteuid() != 0):
        log("fault_matrix: namespace and container rows need root: skipped")
        rows = [r for r in rows if r[3] not in NEEDS_ROOT]
    if any(r[3] == "containers" for r in rows) and (subprocess.run(
            UNSHARE + ["true"], capture_output=True, timeout=20).returncode != 0):
        log("fault_matrix: unshare --pid is refused here: container rows skipped")
        rows = [r for r in rows if r[3] != "containers"]
    if any(r[3] == "netns" for r in rows):
        hosts = Hosts(max(max(layout("netns", r[2])) for r in rows if r[3] == "netns"))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    head = "| fault | stage | ranks | transport | survivors reported (max) | first error | hang | /dev/shm left |"
    log("MESHCCL_NET_TIMEOUT=%d s, MESHCCL_INIT_TIMEOUT=%d s, a survivor still running %d s "
        "after the fault is a hang" % (NET_TIMEOUT_S, INIT_TIMEOUT_S, REPORT_LIMIT_S))
    log(head)
    log("| --- | --- | ---: | --- | ---: | --- | --- | ---: |")
    t0 = time.time()
    bad = 0
    for fault, stage, n, t in rows:
        res = run_row(a.build, hosts, fault, stage, n, t)
        bad += (res["hang"] == "yes") or (res["shm"] != 0)
        said = res["said"].replace("|", "/")
        log("| %s | %s | %d | %s | %s | %s | %s | %d |" % (fault, stage, n, t, res["time"], said,
                                                          res["hang"], res["shm"]))
    log("%d rows in %.0f s; %d with a hang or /dev/shm leftovers" % (len(rows), time.time() - t0,
                                                                   bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
