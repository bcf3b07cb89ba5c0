#!/usr/bin/env bash
# bench/serve.sh -- issue 18 §6: `loopctl serve` on the 10,000-run folder (and a merged log).
#
#   1. start-up: launch to the first `200` on /healthz (the replay done), vs `loopctl list --json`
#      on the same root (target: within 1.5x)
#   2. RSS once replayed (VmRSS, VmHWM from /proc)
#   3. scrape latency p50/p99 over N sequential GET /metrics while events are appended to live
#      logs at RATE/s (target p99 <= 50 ms), RSS during and after (target <= 150 MiB), and the
#      delay from an append to the first scrape that shows it
#   4. `export prometheus --textfile` read back by node_exporter's textfile collector: the same
#      loopctl_ series and values
#
# Prints a Markdown section on stdout (bench/results.md keeps the latest).
set -euo pipefail
export LC_ALL=C

usage() {
  cat <<'EOF'
usage: bench/serve.sh [options]

  --data DIR      folder holding dir10k/ and big70.jsonl (default ../benchdata)
  --merged FILE   a merged log to time start-up on (a name in DATA or a path); repeat for
                  several (default big70.jsonl; issue 18 names the 1 GiB one: big.jsonl)
  --runs N        start-up repetitions (default 3)
  --scrapes N     scrapes timed (default 500)
  --rate N        events appended per second during the scrapes (default 1000)
  --live N        run folders the events are appended to (default 50)
  --skip-node     leave out the node_exporter comparison
  -h, --help      this text

environment: LOOPCTL=PATH (default target/release/loopctl), NODE_EXPORTER=PATH (default
prometheus-node-exporter on PATH; `apt-get install prometheus-node-exporter`).
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DATA=$ROOT/../benchdata
RUNS=3
SCRAPES=500
RATE=1000
LIVE=50
SKIP_NODE=0
MERGED=()
while [ $# -gt 0 ]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --merged) MERGED+=("$2"); shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --scrapes) SCRAPES=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --live) LIVE=$2; shift 2 ;;
    --skip-node) SKIP_NODE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
LOOPCTL=${LOOPCTL:-$ROOT/target/release/loopctl}
NODE_EXPORTER=${NODE_EXPORTER:-$(command -v prometheus-node-exporter || true)}
DIR=$DATA/dir10k
[ ${#MERGED[@]} -gt 0 ] || MERGED=(big70.jsonl)
BIGS=()
for m in "${MERGED[@]}"; do
  case $m in /*) BIGS+=("$m") ;; *) BIGS+=("$DATA/$m") ;; esac
done
[ -x "$LOOPCTL" ] || { echo "no $LOOPCTL: cargo build --release -p loopctl" >&2; exit 2; }
[ -d "$DIR" ] || { echo "no $DIR: python3 ../shared/bench/gen.py dir $DIR" >&2; exit 2; }
say() { printf '==> %s\n' "$*" >&2; }

WORK=$(mktemp -d)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$LAUNCHER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rss_mib() { awk -v k="$2:" '$1==k {printf "%.1f", $2/1024}' "/proc/$1/status"; }

# Starts serve on "$@" (not in a subshell: it sets SERVER, PORT, STARTUP and STARTCPU): STARTUP is
# the seconds from launch to the first /healthz 200, STARTCPU the server's CPU seconds then.
# bench/launch.py launches it and waits, idle, for the line serve prints once the replay is done
# (then checks /healthz: 200); polling /healthz would take CPU from the server as it starts up
# (a connection and a thread per request). It says so through a fifo and stays the server's
# parent.
start_serve() {
  PORT=$(free_port)
  rm -f "$WORK/ready"; mkfifo "$WORK/ready"
  python3 "$HERE/launch.py" ready "$PORT" "$WORK/serve.err" -- \
    "$LOOPCTL" serve --listen "127.0.0.1:$PORT" "$@" >"$WORK/ready" &
  LAUNCHER=$!
  STARTCPU=
  read -r SERVER STARTUP STARTCPU <"$WORK/ready" || true
  [ -n "${STARTCPU:-}" ] || { cat "$WORK/serve.err" >&2; exit 1; }
}
stop_serve() { kill "$SERVER"; wait "$LAUNCHER" 2>/dev/null || true; SERVER=; }

time_list() { python3 "$HERE/launch.py" exit -- "$LOOPCTL" list "$1" --json; }

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
say "warming the page cache"
find "$DIR" -name history.jsonl -exec cat {} + >/dev/null
for b in "${BIGS[@]}"; do [ -f "$b" ] && cat "$b" >/dev/null; done

startup_row() { # label path
  local list=() lcpu=() serve=() scpu=() rss="" hwm="" out
  for _ in $(seq "$RUNS"); do
    out=$(time_list "$2")
    list+=("${out% *}"); lcpu+=("${out#* }")
    start_serve "$2"
    serve+=("$STARTUP"); scpu+=("$STARTCPU")
    rss=$(rss_mib "$SERVER" VmRSS); hwm=$(rss_mib "$SERVER" VmHWM)
    stop_serve
  done
  local l s lc sc
  l=$(printf '%s\n' "${list[@]}" | median); s=$(printf '%s\n' "${serve[@]}" | median)
  lc=$(printf '%s\n' "${lcpu[@]}" | median); sc=$(printf '%s\n' "${scpu[@]}" | median)
  printf '| %s | %.2f / %.2f | %.2f / %.2f | %.2fx | %s | %s |\n' "$1" "$l" "$lc" "$s" "$sc" \
    "$(echo "$s / $l" | bc -l)" "$rss" "$hwm"
}

say "start-up ($RUNS runs each)"
TABLE="| input | list --json s / CPU s | serve to /healthz s / CPU s | ratio | RSS MiB | peak RSS MiB |
|---|---|---|---|---|---|
$(startup_row "dir10k (10,000 run folders, $(du -sm "$DIR" | cut -f1) MB)" "$DIR")"
for b in "${BIGS[@]}"; do
  if [ -f "$b" ]; then
    TABLE+="
$(startup_row "$(basename "$b") (one merged log, $(($(stat -c %s "$b") / 1000000)) MB)" "$b")"
  else
    say "no $b, left out"
  fi
done

say "scrapes under appends: a copy of dir10k with $LIVE live runs"
COPY=$WORK/dir10k
mkdir -p "$COPY"
cp -r "$DIR"/. "$COPY"/
start_serve "$COPY"
RSS_START=$(rss_mib "$SERVER" VmRSS)
python3 - "$COPY" "$PORT" "$SCRAPES" "$RATE" "$LIVE" "$SERVER" >"$WORK/scrape.txt" <<'EOF'
import json, os, sys, threading, time, http.client
root, port, scrapes, rate, live, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
stop = threading.Event()
appended = [0]
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) / 1024
peak = [0.0]
def appender():
    files = []
    for i in range(live):
        d = os.path.join(root, f"live-{i:03d}")
        os.makedirs(d, exist_ok=True)
        f = open(os.path.join(d, "history.jsonl"), "a", buffering=1)
        f.write(json.dumps({"v": 1, "seq": 1, "ts": "2026-11-23T00:00:00.000Z", "run_id": f"live-bench-20261123-{i:06d}", "event": "run_started", "payload": {"max_iterations": 1000000}}) + "\n")
        files.append(f)
    seq = [1] * live
    t0 = time.time(); n = 0
    while not stop.is_set():
        due = int((time.time() - t0) * rate)
        while n < due:
            i = n % live; seq[i] += 1
            kind = ("phase_started", "phase_finished", "evaluation_done")[seq[i] % 3]
            payload = {"score": 0.5} if kind == "evaluation_done" else {}
            files[i].write(json.dumps({"v": 1, "seq": seq[i], "ts": "2026-11-23T00:00:01.000Z", "run_id": f"live-bench-20261123-{i:06d}", "event": kind, "step": "build", "iteration": seq[i] // 3, "payload": payload}) + "\n")
            n += 1
        appended[0] = n
        time.sleep(0.005)
def get(path="/metrics"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path); r = c.getresponse(); body = r.read(); c.close()
    return body
def started(body):
    for l in body.decode().splitlines():
        if l.startswith('loopctl_runs_started_total{loop="probe"}'):
            return True
    return False
t = threading.Thread(target=appender); t.start()
time.sleep(2)
lat = []
t_begin = time.time()
for i in range(scrapes):
    s = time.perf_counter(); body = get(); lat.append(time.perf_counter() - s)
    if i % 20 == 0:
        peak[0] = max(peak[0], rss())
    time.sleep(0.01)
wall = time.time() - t_begin
# An appended event, and the first scrape that shows it.
d = os.path.join(root, "probe-run"); os.makedirs(d, exist_ok=True)
p = os.path.join(d, "history.jsonl")
t_app = time.time()
with open(p, "a") as f:
    f.write(json.dumps({"v": 1, "seq": 1, "ts": "2026-11-23T00:00:00.000Z", "run_id": "probe-20261123-000000", "event": "run_started", "payload": {}}) + "\n")
scr = 0
while not started(get()):
    scr += 1; time.sleep(0.05)
visible = time.time() - t_app
stop.set(); t.join()
peak[0] = max(peak[0], rss())
lat.sort()
q = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))] * 1000
print(f"{len(lat)} {q(0.5):.2f} {q(0.99):.2f} {lat[-1]*1000:.2f} {appended[0]} {appended[0]/ (wall + 2):.0f} {peak[0]:.1f} {rss():.1f} {visible*1000:.0f} {scr} {len(get())}")
EOF
read -r N P50 P99 MAX APPENDED ARATE PEAK RSS_END VISIBLE MISSED BYTES <"$WORK/scrape.txt"
stop_serve

NODE=""
if [ "$SKIP_NODE" = 0 ] && [ -n "$NODE_EXPORTER" ]; then
  say "textfile export read by node_exporter"
  mkdir -p "$WORK/textfile"
  t0=$(now)
  "$LOOPCTL" export prometheus "$DIR" --textfile "$WORK/textfile/loopctl.prom" 2>/dev/null
  EXPORT_S=$(echo "$(now) - $t0" | bc -l)
  NPORT=$(free_port)
  "$NODE_EXPORTER" --web.listen-address="127.0.0.1:$NPORT" --collector.disable-defaults \
    --collector.textfile --collector.textfile.directory="$WORK/textfile" 2>"$WORK/node.err" &
  NODE_PID=$!
  until curl -sf "http://127.0.0.1:$NPORT/metrics" -o "$WORK/node.txt"; do sleep 0.1; done
  kill "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
  grep '^loopctl_' "$WORK/textfile/loopctl.prom" | sort >"$WORK/a"
  grep '^loopctl_' "$WORK/node.txt" | sort >"$WORK/b"
  # node_exporter sorts the labels and re-prints values in Go's float format: compare the
  # label sets as sets and the values as numbers.
  SAME=$(python3 - "$WORK/a" "$WORK/b" <<'EOF'
import re, sys
def rows(p):
    out = {}
    for l in open(p):
        k, v = l.rstrip("\n").rsplit(" ", 1)
        name = k.split("{", 1)[0]
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', k)))
        out[(name, labels)] = float(v)
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
diff = [k for k in a.keys() | b.keys() if a.get(k) != b.get(k)]
print(f"{len(a)} {len(b)} {len(diff)}")
EOF
)
  read -r NA NB NDIFF <<<"$SAME"
  ERRS=$(grep -c 'textfile' "$WORK/node.err" | tr -d ' ' || true)
  NODE="
### Textfile export and node_exporter

\`loopctl export prometheus dir10k --textfile F\` took $(printf '%.2f' "$EXPORT_S") s and wrote
$(stat -c %s "$WORK/textfile/loopctl.prom") bytes. \`$(basename "$NODE_EXPORTER") $("$NODE_EXPORTER" --version 2>&1 | head -1 | awk '{print $3}') --collector.disable-defaults --collector.textfile\`
read it back: $NA loopctl_ samples in the file, $NB in node_exporter's scrape, $NDIFF differing
(name, labels or value); \`node_textfile_scrape_error\` = $(awk '/^node_textfile_scrape_error/ {print $2}' "$WORK/node.txt")."
fi

cat <<EOF
## loopctl serve (issue 18 §6)

\`bench/serve.sh --runs $RUNS --scrapes $SCRAPES --rate $RATE --live $LIVE$(printf ' --merged %s' "${MERGED[@]}")\` on $(date -u +%Y-%m-%d),
$(nproc) cores, \`$("$LOOPCTL" --version)\`. Start-up: launch to the line serve prints
once the replay is done, when \`/healthz\` turns \`200\` (checked), by one idle process
(\`bench/launch.py\`: no polling), median of $RUNS, page cache warm; \`list --json\` on the same
input, launched the same way. CPU s: the process's user + system seconds (the server's at that
line).
Load average (1, 5, 15 min) at the start: $LOAD0; at the end: $(cut -d' ' -f1-3 /proc/loadavg).

$TABLE

Scrapes: a copy of dir10k plus $LIVE live run folders receiving events at $RATE/s
($APPENDED appended, $ARATE/s achieved), $N sequential \`GET /metrics\` ($BYTES bytes each):

| p50 ms | p99 ms | max ms | RSS before MiB | peak RSS MiB | RSS after MiB | append → visible in a scrape |
|---|---|---|---|---|---|---|
| $P50 | $P99 | $MAX | $RSS_START | $PEAK | $RSS_END | $VISIBLE ms ($MISSED scrapes without it) |
$NODE
EOF
