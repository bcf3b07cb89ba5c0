#!/usr/bin/env python3
"""Times a command from its launch, from one process that stays idle while it waits.

  launch.py ready PORT ERRFILE -- CMD...   launch CMD (`loopctl serve`), wait for the line its
      stderr prints once the start-up replay is done ("... replayed; following them"), check
      that http://127.0.0.1:PORT/healthz then answers 200, and print "PID SECONDS CPU_SECONDS"
      (the server's user + system time at that line); its stderr goes on to ERRFILE; then wait
      for the server to end (kill PID) and exit with its status
  launch.py exit -- CMD...                 run CMD to its end, output discarded; print
      "SECONDS CPU_SECONDS"

Why the server's own line and not polling /healthz: every request costs the server a
connection and a thread while it starts up (on a 2-core machine, polling every 2 ms added
~0.2 s of CPU to a 1 GiB replay; a shell loop of curl, more), and `list` is not timed under
such a load. The server sets /healthz to 200 just before it prints the line.
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


READY = b"replayed; following them"


def ready(port, errfile, cmd):
    err = open(errfile, "wb")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for line in p.stderr:
        err.write(line)
        if READY in line:
            break
    else:
        sys.exit(f"{cmd[0]} exited with {p.wait()} before saying it had replayed the logs")
    t = time.monotonic() - t0
    cpu = cpu_seconds(p.pid)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/healthz")
    status = c.getresponse().status
    c.close()
    if status != 200:
        p.kill()
        sys.exit(f"/healthz answered {status} after the replay line")
    print(p.pid, f"{t:.4f}", f"{cpu:.2f}", flush=True)
    sys.stdout.close()
    # The rest of its stderr, so that the pipe never fills; it stays the server's parent, so
    # that it is reaped (a container's init may not reap orphans).
    for line in p.stderr:
        err.write(line)
    err.close()
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
