#!/usr/bin/env python3
"""Times a command from its launch, from one process that stays idle while it waits.

  launch.py ready PORT ERRFILE -- CMD...   launch CMD (a server), poll
      http://127.0.0.1:PORT/healthz every 2 ms until it answers 200; print
      "PID SECONDS CPU_SECONDS" (the server's user + system time then), then wait for the
      server to end (kill PID) and exit with its status
  launch.py exit -- CMD...                 run CMD to its end, output discarded; print
      "SECONDS CPU_SECONDS"

Why not a shell loop of `curl`: on a 2-core machine a curl started every 10 ms takes a
noticeable share of the CPU the server is starting up on (measured: ~0.1 s more start-up on
dir10k), and `list` is not timed under such a load.
"""
import http.client
import os
import resource
import subprocess
import sys
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ready(port, errfile, cmd):
    with open(errfile, "wb") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/healthz")
            status = c.getresponse().status
            c.close()
            if status == 200:
                break
        except OSError:
            pass
        if p.poll() is not None:
            sys.exit(f"{cmd[0]} exited with {p.returncode} before /healthz answered 200")
        time.sleep(0.002)
    print(p.pid, f"{time.monotonic() - t0:.4f}", f"{cpu_seconds(p.pid):.2f}", flush=True)
    sys.stdout.close()
    # Stays its parent, so that it is reaped (a container's init may not reap orphans).
    p.wait()


def main(argv):
    if len(argv) >= 3 and argv[0] == "exit" and argv[1] == "--":
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        subprocess.run(argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"{t:.4f}", f"{cpu:.2f}")
    elif len(argv) >= 5 and argv[0] == "ready" and argv[3] == "--":
        ready(int(argv[1]), argv[2], argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
