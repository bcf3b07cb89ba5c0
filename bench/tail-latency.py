#!/usr/bin/env python3
"""Append-to-print latency and loss of `loopctl tail --json` against `tail -F` on the same file.

    bench/tail-latency.py [--events 2000] [--rate 50000] [--seconds 10]

Phase 1 appends timestamped events one at a time (1 ms apart) and measures, for each tool, the
time from the append to the line appearing on the tool's stdout (median, p99, max).
Phase 2 appends at --rate events/s for --seconds in 10 ms batches and checks that each tool
prints every event exactly once, in order, sampling each tool's RSS once a second.
Not part of CI: a script you run and report.
"""
import argparse, json, os, subprocess, sys, tempfile, threading, time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


def event(seq):
    return ('{"v":1,"seq":%d,"ts":"2026-01-01T00:00:00.000Z","run_id":"bench","event":"usage",'
            '"payload":{"t":%d}}\n' % (seq, time.time_ns()))


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None


class Reader:
    def __init__(self, name, cmd):
        self.name = name
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        self.latencies = {}
        self.seqs = []
        self.lock = threading.Lock()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        f = self.proc.stdout
        for raw in f:
            now = time.time_ns()
            line = raw.decode("utf-8", "replace")
            i = line.find('"seq":')
            if i < 0:
                continue
            j = line.find(",", i)
            seq = int(line[i + 6:j])
            with self.lock:
                self.seqs.append(seq)
                if seq <= PHASE1:
                    t = line.find('"t":')
                    sent = int(line[t + 4:line.find("}", t)])
                    self.latencies[seq] = (now - sent) / 1e6


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def main():
    global PHASE1
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--rate", type=int, default=50000)
    ap.add_argument("--seconds", type=float, default=10)
    a = ap.parse_args()
    PHASE1 = a.events
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "loopctl"], cwd=repo, check=True)
    binary = os.path.join(repo, "target/release/loopctl")
    d = tempfile.mkdtemp()
    log = os.path.join(d, "history.jsonl")
    with open(log, "w") as f:
        f.write('{"v":1,"seq":0,"run_id":"bench","event":"run_started"}\n')
    readers = [
        Reader("loopctl tail --json", [binary, "tail", "--json", "-n", "0", log]),
        Reader("tail -F", ["tail", "-n", "0", "-F", log]),
    ]
    time.sleep(1.0)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    for seq in range(1, a.events + 1):
        os.write(fd, event(seq).encode())
        time.sleep(0.001)
    time.sleep(1.0)
    print(f"phase 1: {a.events} events appended 1 ms apart, append-to-print latency in ms")
    for r in readers:
        with r.lock:
            lat = list(r.latencies.values())
        print(f"  {r.name:22} received {len(lat):6}  median {pct(lat, 50):7.3f}  p99 {pct(lat, 99):7.3f}  max {max(lat or [0]):8.3f}")

    for r in readers:
        r.proc.kill()
    os.close(fd)

    # Phase 2: each tool writes to a file (a Python pipe reader could not keep up at this rate).
    log2 = os.path.join(d, "fast.jsonl")
    open(log2, "w").close()
    outs = {}
    procs = []
    for name, cmd in [("loopctl tail --json", [binary, "tail", "--json", "-n", "0", log2]),
                      ("tail -F", ["tail", "-n", "0", "-F", log2])]:
        out = os.path.join(d, name.split()[0] + ".out")
        outs[name] = out
        procs.append((name, subprocess.Popen(cmd, stdout=open(out, "wb"), stderr=subprocess.DEVNULL)))
    time.sleep(1.0)
    fd = os.open(log2, os.O_WRONLY | os.O_APPEND)
    total = int(a.rate * a.seconds)
    batch = max(1, a.rate // 100)
    rss = {name: [] for name, _ in procs}
    t0 = time.monotonic()
    seq = 1
    next_sample = t0
    while seq <= total:
        n = min(batch, total + 1 - seq)
        os.write(fd, "".join(event(s) for s in range(seq, seq + n)).encode())
        seq += n
        now = time.monotonic()
        if now >= next_sample:
            for name, p in procs:
                rss[name].append(rss_kib(p.pid))
            next_sample += 1.0
        target = t0 + (seq - 1) / a.rate
        if target > now:
            time.sleep(target - now)
    wrote = time.monotonic() - t0
    os.close(fd)
    # Wait until both outputs stop growing.
    last = None
    while True:
        time.sleep(0.5)
        sizes = [os.path.getsize(o) for o in outs.values()]
        if sizes == last:
            break
        last = sizes
    print(f"phase 2: {total} events at {a.rate}/s target ({total / wrote:.0f}/s achieved) for {wrote:.1f} s")
    for name, p in procs:
        p.kill()
        got = []
        with open(outs[name], "rb") as f:
            for line in f:
                i = line.find(b'"seq":')
                got.append(int(line[i + 6:line.find(b",", i)]))
        lost = total - len(set(got) & set(range(1, total + 1)))
        dup = len(got) - len(set(got))
        mem = [m for m in rss[name] if m]
        print(f"  {name:22} printed {len(got):8}  lost {lost}  duplicated {dup}  in order {got == sorted(got)}  "
              f"RSS KiB first {mem[0] if mem else '?'} last {mem[-1] if mem else '?'} max {max(mem) if mem else '?'}")


if __name__ == "__main__":
    main()
