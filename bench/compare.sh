#!/usr/bin/env bash
# bench/compare.sh -- time loopctl against jq, DuckDB and polars on the reference jobs
# (see ../shared/bench/README.md beside the repository, and bench/README.md).
#
#   job A  count events by type     loopctl check FILE --json    | jq_a.jq | duck.py a | pol.py a
#   job B  final state per run      loopctl list FILE --json     | jq_b.jq | duck.py b | pol.py b
#          (and loopctl replay FILE --json, which prints each run's whole run.json: ~60 MB)
#   job C  job B over a run folder  loopctl list DIR --json      | jq_b.jq | duck.py b | pol.py b
#   job D  success rate and p95 phase duration by loop, over the run folder:
#          loopctl query SQL DIR | bench/duck_de.py | bench/pol_de.py
#   job E  job D over the 1 GiB log
#   job F  the 1 GiB log to Parquet: loopctl export parquet | DuckDB COPY ... TO (bench/duck_export.py)
#
# Each tool runs N times under /usr/bin/time, output to /dev/null. Reported: median wall
# time, MB/s (input bytes / median seconds, MB = 10^6 bytes), peak RSS (max of %M over the runs).
set -euo pipefail
export LC_ALL=C

usage() {
  cat <<'EOF'
usage: bench/compare.sh [options]

  --data DIR       data folder holding big.jsonl and dir10k/ (default ../benchdata beside
                   the repository); whatever is missing is generated with $SHARED/gen.py
  --runs N         timed repetitions per tool and job (default 5)
  --only JOBS      a, b, c, d, e or f (or several, e.g. "a,b"); default all
  --skip-jq        leave jq out
  --jq-size SIZE   run jq on a prefix of the input of about SIZE bytes (K/M/G suffixes are
                   powers of 1024), cut at a line end; for job C, on the first run folders
                   adding up to SIZE. MB/s is then computed from the prefix size.
                   Without it jq reads the whole input, once if that is over 256 MiB.
  --jq-timeout S   stop a jq run after S seconds (default 300; 0 = no limit) and report
                   "> S s": jq 1.6 slows down as job B's table of runs grows, and would
                   take hours over the whole 1 GiB log
  --skip-loopctl   leave loopctl out (to try the script before loopctl is built)
  --out FILE       where to write the results (default bench/results.md)
  -h, --help       this text

environment:
  SHARED=DIR       folder with gen.py, jq_a.jq, jq_b.jq, duck.py, pol.py
                   (default ../shared/bench beside the repository; a folder holding bench/
                   works too)
  LOOPCTL=PATH     loopctl binary to time (default target/release/loopctl, built with
                   `cargo build --release -p loopctl` if it is missing)
  PYTHON=PATH      python interpreter for duck.py / pol.py / gen.py (default python3)
EOF
}

CMDLINE="bench/compare.sh${*:+ $*}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)

DATA=$ROOT/../benchdata
RUNS=5
ONLY=abcdef
SKIP_JQ=0
SKIP_LOOPCTL=0
JQ_SIZE=
JQ_TIMEOUT=300
OUT=$HERE/results.md
JQ_FULL_MAX=$((256 * 1024 * 1024))   # jq over a larger input gets a single run
PY=${PYTHON:-python3}

say()  { printf '==> %s\n' "$*" >&2; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
die()  { printf 'compare.sh: %s\n' "$*" >&2; exit 2; }

while (($#)); do
  case $1 in
    --data) DATA=${2:?--data needs a folder}; shift 2 ;;
    --data=*) DATA=${1#*=}; shift ;;
    --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
    --runs=*) RUNS=${1#*=}; shift ;;
    --only) ONLY=${2:?--only needs a job letter}; shift 2 ;;
    --only=*) ONLY=${1#*=}; shift ;;
    --skip-jq) SKIP_JQ=1; shift ;;
    --jq-size) JQ_SIZE=${2:?--jq-size needs a size}; shift 2 ;;
    --jq-size=*) JQ_SIZE=${1#*=}; shift ;;
    --jq-timeout) JQ_TIMEOUT=${2:?--jq-timeout needs seconds}; shift 2 ;;
    --jq-timeout=*) JQ_TIMEOUT=${1#*=}; shift ;;
    --skip-loopctl) SKIP_LOOPCTL=1; shift ;;
    --out) OUT=${2:?--out needs a file}; shift 2 ;;
    --out=*) OUT=${1#*=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer, not '$RUNS'"
[[ $JQ_TIMEOUT =~ ^[0-9]+$ ]] || die "--jq-timeout must be a whole number of seconds, not '$JQ_TIMEOUT'"
ONLY=${ONLY//[ ,]/}
ONLY=${ONLY,,}
[[ $ONLY =~ ^[abcdef]+$ ]] || die "--only takes a, b, c, d, e or f (or several), not '$ONLY'"
want() { [[ $ONLY == *"$1"* ]]; }
if [[ -n $JQ_SIZE ]]; then
  JQ_SIZE=${JQ_SIZE%B}
  JQ_SIZE=$(numfmt --from=iec "${JQ_SIZE%i}" 2>/dev/null) || die "bad --jq-size (try 64M)"
  ((JQ_SIZE > 0)) || die "--jq-size must be positive"
fi

SHARED=${SHARED:-$ROOT/../shared/bench}
if [[ ! -f $SHARED/gen.py && -f $SHARED/bench/gen.py ]]; then SHARED=$SHARED/bench; fi
for f in gen.py duck.py pol.py jq_a.jq jq_b.jq; do
  [[ -f $SHARED/$f ]] || die "SHARED=$SHARED has no $f"
done

BIG=$DATA/big.jsonl
DIR=$DATA/dir10k

TMP=$(mktemp -d "${TMPDIR:-/tmp}/loopctl-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------- installs ----
as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "root needed for: $*"
  fi
}
apt_missing=()
if ((!SKIP_JQ)) && ! command -v jq >/dev/null 2>&1; then apt_missing+=(jq); fi
[[ -x /usr/bin/time ]] || apt_missing+=(time)   # GNU time, for peak RSS (%M)
if ((${#apt_missing[@]})); then
  say "installing: apt-get install -y ${apt_missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi
py_missing=()
for m in duckdb polars; do
  "$PY" -c "import $m" 2>/dev/null || py_missing+=("$m")
done
if ((${#py_missing[@]})); then
  say "installing: $PY -m pip install ${py_missing[*]}"
  if ! "$PY" -m pip install -q "${py_missing[@]}"; then
    # a distribution's own python refuses pip installs (PEP 668) unless told otherwise
    say "installing: $PY -m pip install --break-system-packages ${py_missing[*]}"
    "$PY" -m pip install -q --break-system-packages "${py_missing[@]}"
  fi
fi

# ------------------------------------------------------------------- data -----
wait_for_gen() {   # someone else may still be writing this path with gen.py
  local what=$1 path=$2 waited=0
  while pgrep -f "gen\.py $what .*$(basename "$path")" >/dev/null 2>&1; do
    ((waited)) || say "gen.py is still writing $path; waiting for it"
    waited=1
    sleep 5
  done
}
mkdir -p "$DATA"
if want a || want b || want e || want f; then
  wait_for_gen big "$BIG"
  if [[ ! -s $BIG ]]; then
    say "generating $BIG (~1 GiB): $PY $SHARED/gen.py big $BIG --size-bytes 1073741824"
    "$PY" "$SHARED/gen.py" big "$BIG.partial" --size-bytes 1073741824
    mv "$BIG.partial" "$BIG"
  fi
fi
if want c || want d; then
  wait_for_gen dir "$DIR"
  if [[ ! -d $DIR ]] || [[ -z $(find "$DIR" -mindepth 2 -maxdepth 2 -name history.jsonl -print -quit) ]]; then
    say "generating $DIR (10,000 runs, ~270 MB): $PY $SHARED/gen.py dir $DIR --runs 10000"
    rm -rf "$DIR.partial"
    "$PY" "$SHARED/gen.py" dir "$DIR.partial" --runs 10000
    rm -rf "$DIR"
    mv "$DIR.partial" "$DIR"
  fi
fi

# ---------------------------------------------------------------- loopctl -----
if ((!SKIP_LOOPCTL)); then
  if [[ -n ${LOOPCTL:-} ]]; then
    [[ -x $LOOPCTL ]] || die "LOOPCTL=$LOOPCTL is not an executable"
  else
    LOOPCTL=${CARGO_TARGET_DIR:-$ROOT/target}/release/loopctl
    if [[ ! -x $LOOPCTL ]]; then
      command -v cargo >/dev/null 2>&1 || die "$LOOPCTL is missing and cargo is not on PATH"
      say "building loopctl: (cd $ROOT && cargo build --release -p loopctl)"
      (cd "$ROOT" && cargo build --release -p loopctl)
      [[ -x $LOOPCTL ]] || die "the build did not produce $LOOPCTL"
    fi
  fi
fi

# ---------------------------------------------------------------- helpers -----
cpu_busy() {  # % of all cores busy over one second (other work on the machine skews timings)
  local a b
  read -ra a < <(grep '^cpu ' /proc/stat)
  sleep 1
  read -ra b < <(grep '^cpu ' /proc/stat)
  awk -v u="$((b[1] + b[2] + b[3] + b[6] + b[7] - a[1] - a[2] - a[3] - a[6] - a[7]))" \
      -v i="$((b[4] + b[5] - a[4] - a[5]))" 'BEGIN { printf "%.0f", (u + i) ? 100 * u / (u + i) : 0 }'
}
BUSY_BEFORE=$(cpu_busy)
if ((BUSY_BEFORE > 15)); then
  warn "the machine is already ${BUSY_BEFORE}% busy (busiest: $(top -b -n 2 -d 0.5 -w 200 | awk '/^ *PID/ { f++; next } f == 2 && NF { print $NF }' | head -n 3 | paste -sd, -)); timings will be skewed"
fi
fsize() { stat -c %s "$1"; }
mib()   { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

ROWS=()        # "job|tool|median|mbs|rss"
DETAILS=()     # per-run wall times, for results.md
FAILED=0

# bench JOB KEY LABEL BYTES NRUNS OKCODES TIMEOUT -- CMD...
#   times CMD NRUNS times (stdout to /dev/null, stderr kept in $TMP/err.JOB.KEY);
#   an exit code outside OKCODES marks the row as failed and stops that tool; a run
#   that outlives TIMEOUT seconds (0 = no limit) is stopped and the row says "> TIMEOUT".
bench() {
  local job=$1 key=$2 label=$3 bytes=$4 n=$5 ok=$6 limit=$7; shift 8
  local err=$TMP/err.$job.$key tf=$TMP/time i code t0 t1 last rss walls=() maxrss=0 pre=()
  local shown=("${@:1:6}")
  (($# > 6)) && shown+=("... ($(($# - 6)) more arguments)")
  say "job ${job^^} / $label: $n run(s) of: ${shown[*]}"
  ((limit > 0)) && pre=(timeout --kill-after=10 "$limit")
  for ((i = 1; i <= n; i++)); do
    code=0
    t0=$EPOCHREALTIME
    /usr/bin/time -f '%e %M' -o "$tf" "${pre[@]}" "$@" >/dev/null 2>"$err" || code=$?
    t1=$EPOCHREALTIME
    last=$(tail -n 1 "$tf")
    rss=${last##* }
    [[ $rss =~ ^[0-9]+$ ]] || rss=0
    if ((rss > maxrss)); then maxrss=$rss; fi
    if ((limit > 0)) && [[ $code == 124 || $code == 137 ]]; then
      warn "$label (job ${job^^}) did not finish within ${limit} s; stopped"
      ROWS+=("${job^^}|$label|> $limit|< $(awk -v b="$bytes" -v s="$limit" 'BEGIN { r = b / 1e6 / s; printf (r < 10 ? "%.1f" : "%.0f"), r }')|$(awk -v k="$maxrss" 'BEGIN { printf "%.0f", k / 1024 }')")
      DETAILS+=("${job^^} $label ($(mib "$bytes") MiB in): ${walls[*]}${walls[*]:+ }stopped after ${limit} s")
      return 0
    fi
    if [[ " $ok " != *" $code "* ]]; then
      warn "$label (job ${job^^}) exited with status $code; end of its stderr:"
      tail -n 5 "$err" | sed 's/^/    /' >&2
      ROWS+=("${job^^}|$label|FAILED (exit $code)||")
      FAILED=1
      return 0
    fi
    walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
    printf '    run %d: %s s, %s MiB\n' "$i" "${walls[-1]}" "$(awk -v k="$rss" 'BEGIN { printf "%.0f", k / 1024 }')" >&2
  done
  local med mbs rssm
  med=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ v[NR] = $1 } END {
          m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf (m < 10 ? "%.3f" : "%.2f"), m }')
  mbs=$(awk -v b="$bytes" -v s="$med" 'BEGIN { r = b / 1e6 / s; printf (r < 10 ? "%.1f" : "%.0f"), r }')
  rssm=$(awk -v k="$maxrss" 'BEGIN { printf "%.0f", k / 1024 }')
  ROWS+=("${job^^}|$label|$med|$mbs|$rssm")
  DETAILS+=("${job^^} $label ($(mib "$bytes") MiB in): ${walls[*]} s")
}

stderr_rows() {  # rows=N printed by duck.py / pol.py on their last timed run
  [[ -f $TMP/err.$1.$2 ]] || return 0
  grep -o 'rows=[0-9]*' "$TMP/err.$1.$2" | tail -n 1 | cut -d= -f2 || true
}

count_records() {  # a JSON array's length, or the number of non-blank lines (NDJSON)
  "$PY" - "$1" <<'EOF'
import json, sys
data = open(sys.argv[1], "rb").read()
s = data.lstrip()
if s.startswith(b"["):
    print(len(json.loads(s)))
else:
    print(sum(1 for l in data.splitlines() if l.strip()))
EOF
}

warm() {  # read the input once so every tool starts with it in the page cache
  say "reading $1 into the page cache"
  if [[ -d $1 ]]; then
    find "$1" -mindepth 2 -maxdepth 2 -name history.jsonl -print0 | xargs -0 cat >/dev/null
  else
    cat "$1" >/dev/null
  fi
}

jq_runs() { if (($1 > JQ_FULL_MAX)); then echo 1; else echo "$RUNS"; fi; }
jq_label() {  # jq_label NRUNS NOTE
  local s=$2
  if (($1 < RUNS)); then s="${s:+$s, }$1 run"; fi
  if [[ -n $s ]]; then echo "jq ($s)"; else echo jq; fi
}

CHECKS=()   # agreement checks, for results.md

# ------------------------------------------------------------- jobs A, B ------
JQ_IN=$BIG
JQ_NOTE=
if (want a || want b) && ((!SKIP_JQ)) && [[ -n $JQ_SIZE ]] && ((JQ_SIZE < $(fsize "$BIG"))); then
  JQ_IN=$TMP/prefix.jsonl
  head -c "$JQ_SIZE" "$BIG" | head -n -1 >"$JQ_IN"   # drop the cut last line
  JQ_NOTE="prefix $(mib "$(fsize "$JQ_IN")") MiB"
  say "jq input: first $(fsize "$JQ_IN") bytes of $BIG"
fi

if want a || want b; then
  BIG_BYTES=$(fsize "$BIG")
  JQ_BYTES=$(fsize "$JQ_IN")
  warm "$BIG"
fi

if want a; then
  ((SKIP_LOOPCTL)) || bench a loopctl loopctl "$BIG_BYTES" "$RUNS" "0 1" 0 -- "$LOOPCTL" check "$BIG" --json
  bench a duckdb DuckDB "$BIG_BYTES" "$RUNS" 0 0 -- "$PY" "$SHARED/duck.py" a "$BIG"
  bench a polars polars "$BIG_BYTES" "$RUNS" 0 0 -- "$PY" "$SHARED/pol.py" a "$BIG"
  if ((!SKIP_JQ)); then
    n=$(jq_runs "$JQ_BYTES")
    bench a jq "$(jq_label "$n" "$JQ_NOTE")" "$JQ_BYTES" "$n" 0 "$JQ_TIMEOUT" -- jq -n -r -f "$SHARED/jq_a.jq" "$JQ_IN"
  fi
  # loopctl's counts by event type against DuckDB's (one untimed run each)
  if ((!SKIP_LOOPCTL)); then
    say "checking loopctl check's stats.by_event against DuckDB's counts"
    "$LOOPCTL" check "$BIG" --json >"$TMP/check.json" 2>/dev/null || true
    "$PY" "$SHARED/duck.py" a "$BIG" >"$TMP/duck_a.csv" 2>/dev/null || true
    msg=$("$PY" - "$TMP/check.json" "$TMP/duck_a.csv" <<'EOF'
import json, sys
try:
    by = json.load(open(sys.argv[1]))["stats"]["by_event"]
    if isinstance(by, list):
        by = {d.get("event"): d.get("count", d.get("n")) for d in by}
    by = {k: int(v) for k, v in by.items()}
except Exception as e:
    print(f"SKIP could not read stats.by_event from loopctl check --json ({type(e).__name__}: {e})")
    sys.exit()
duck = {}
for line in open(sys.argv[2]):
    ev, n = line.rstrip("\n").rsplit(",", 1)
    duck[ev] = int(n)
if not duck:
    print("SKIP DuckDB printed no counts"); sys.exit()
diff = {k: (by.get(k), duck.get(k)) for k in set(by) | set(duck) if by.get(k) != duck.get(k)}
if diff:
    print("WARN loopctl vs DuckDB counts differ: " +
          ", ".join(f"{k}: {a} vs {b}" for k, (a, b) in sorted(diff.items(), key=str)))
else:
    print(f"OK {len(duck)} event types, {sum(duck.values())} events: loopctl agrees with DuckDB")
EOF
)
    case $msg in
      WARN*) warn "job A: ${msg#WARN }"; CHECKS+=("job A: **MISMATCH**: ${msg#WARN }") ;;
      OK*)   say "job A: ${msg#OK }"; CHECKS+=("job A: ${msg#OK }") ;;
      *)     warn "job A: ${msg#SKIP }"; CHECKS+=("job A: not checked: ${msg#SKIP }") ;;
    esac
  fi
fi

# run-count agreement: loopctl's records vs DuckDB's rows=
check_runs() {  # check_runs JOB LOOPCTL-OUTPUT-FILE
  local job=$1 out=$2 lc dk pl
  lc=$(count_records "$out") || lc='?'
  dk=$(stderr_rows "$job" duckdb)
  pl=$(stderr_rows "$job" polars)
  local detail="loopctl ${lc} runs, DuckDB ${dk:-?}, polars ${pl:-?}"
  if [[ -z $dk ]]; then
    warn "job ${job^^}: no DuckDB row count to compare with ($detail)"
    CHECKS+=("job ${job^^}: not checked, DuckDB gave no row count ($detail)")
  elif [[ $lc != "$dk" ]]; then
    warn "job ${job^^}: loopctl and DuckDB disagree on the number of runs: $detail"
    CHECKS+=("job ${job^^}: **MISMATCH**: $detail")
  else
    say "job ${job^^}: run counts agree: $detail"
    CHECKS+=("job ${job^^}: run counts agree: $detail")
  fi
}

# count_runs JOB SUBCOMMAND INPUT: one untimed loopctl run whose output check_runs compares.
count_runs() {
  local job=$1 sub=$2 input=$3
  say "job ${job^^}: counting loopctl $sub's runs (one untimed run)"
  if "$LOOPCTL" "$sub" "$input" --json >"$TMP/$sub.out" 2>"$TMP/$sub.err"; then
    check_runs "$job" "$TMP/$sub.out"
  else
    warn "job ${job^^}: loopctl $sub failed; run counts not compared"
    CHECKS+=("job ${job^^}: not checked, loopctl $sub failed")
  fi
}

if want b; then
  # `list` prints what the peers' job B prints (a row of final facts per run); `replay` prints
  # each run's whole run.json (score history and all), which costs more to build and write.
  ((SKIP_LOOPCTL)) || bench b loopctl "loopctl list" "$BIG_BYTES" "$RUNS" 0 0 -- "$LOOPCTL" list "$BIG" --json
  ((SKIP_LOOPCTL)) || bench b replay "loopctl replay (whole run.json)" "$BIG_BYTES" "$RUNS" 0 0 -- "$LOOPCTL" replay "$BIG" --json
  bench b duckdb DuckDB "$BIG_BYTES" "$RUNS" 0 0 -- "$PY" "$SHARED/duck.py" b "$BIG"
  bench b polars polars "$BIG_BYTES" "$RUNS" 0 0 -- "$PY" "$SHARED/pol.py" b "$BIG"
  if ((!SKIP_JQ)); then
    n=$(jq_runs "$JQ_BYTES")
    bench b jq "$(jq_label "$n" "$JQ_NOTE")" "$JQ_BYTES" "$n" 0 "$JQ_TIMEOUT" -- jq -n -r -f "$SHARED/jq_b.jq" "$JQ_IN"
  fi
  ((SKIP_LOOPCTL)) || count_runs b list "$BIG"
fi

# ---------------------------------------------------------------- job C -------
if want c; then
  mapfile -t C_FILES < <(find "$DIR" -mindepth 2 -maxdepth 2 -name history.jsonl | sort)
  ((${#C_FILES[@]})) || die "no */history.jsonl under $DIR"
  C_BYTES=$(printf '%s\0' "${C_FILES[@]}" | du -cb --files0-from=- --apparent-size | tail -n 1 | cut -f1)
  DIR_RUNS=${#C_FILES[@]}
  warm "$DIR"
  ((SKIP_LOOPCTL)) || bench c loopctl loopctl "$C_BYTES" "$RUNS" 0 0 -- "$LOOPCTL" list "$DIR" --json
  bench c duckdb DuckDB "$C_BYTES" "$RUNS" 0 0 -- "$PY" "$SHARED/duck.py" b "$DIR/*/history.jsonl"
  bench c polars polars "$C_BYTES" "$RUNS" 0 0 -- "$PY" "$SHARED/pol.py" b "$DIR/*/history.jsonl"
  if ((!SKIP_JQ)); then
    JQ_C=("${C_FILES[@]}")
    note=
    if [[ -n $JQ_SIZE ]] && ((JQ_SIZE < C_BYTES)); then
      JQ_C=()
      acc=0
      for f in "${C_FILES[@]}"; do
        JQ_C+=("$f")
        acc=$((acc + $(fsize "$f")))
        if ((acc >= JQ_SIZE)); then break; fi
      done
      note="${#JQ_C[@]} of $DIR_RUNS runs"
    fi
    JQC_BYTES=$(printf '%s\0' "${JQ_C[@]}" | du -cb --files0-from=- --apparent-size | tail -n 1 | cut -f1)
    n=$(jq_runs "$JQC_BYTES")
    bench c jq "$(jq_label "$n" "$note")" "$JQC_BYTES" "$n" 0 "$JQ_TIMEOUT" -- jq -n -r -f "$SHARED/jq_b.jq" "${JQ_C[@]}"
  fi
  ((SKIP_LOOPCTL)) || count_runs c list "$DIR"
fi

# ------------------------------------------------------------ jobs D, E, F ----
# Success rate and p95 phase duration by loop (issue 20): loopctl's SQL over its own tables
# against the same answer computed by DuckDB and polars from the raw NDJSON.
DE_SQL="WITH r AS (SELECT loop, count(*) AS runs, avg(CAST(passed AS DOUBLE)) AS success_rate FROM runs GROUP BY loop), p AS (SELECT loop, quantile_cont(duration_ms, 0.95) AS p95_ms FROM phases GROUP BY loop) SELECT r.loop, r.runs, r.success_rate, p.p95_ms FROM r JOIN p ON r.loop = p.loop ORDER BY r.loop"
check_de() {  # check_de JOB INPUT GLOB: loopctl's rows against DuckDB's (one untimed run each)
  local job=$1 input=$2 glob=$3 msg
  "$LOOPCTL" query "$DE_SQL" "$input" --format csv --quiet >"$TMP/de.$job.loopctl" 2>/dev/null || true
  "$PY" "$HERE/duck_de.py" "$glob" >"$TMP/de.$job.duck" 2>/dev/null || true
  msg=$("$PY" - "$TMP/de.$job.loopctl" "$TMP/de.$job.duck" <<'EOF'
import csv, sys
def rows(p, skip):
    out = {}
    for r in list(csv.reader(open(p)))[skip:]:
        out[r[0]] = (int(r[1]), round(float(r[2] or "nan"), 9), round(float(r[3] or "nan"), 3))
    return out
a, b = rows(sys.argv[1], 1), rows(sys.argv[2], 0)
if not a or not b:
    print("SKIP no rows from loopctl or DuckDB"); sys.exit()
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print(f"WARN {len(diff)} loops differ, e.g. {diff[0]}: {a.get(diff[0])} vs {b.get(diff[0])}" if diff
      else f"OK {len(a)} loops: runs, success rate and p95 agree with DuckDB")
EOF
)
  case $msg in
    WARN*) warn "job ${job^^}: ${msg#WARN }"; CHECKS+=("job ${job^^}: **MISMATCH**: ${msg#WARN }") ;;
    OK*)   say "job ${job^^}: ${msg#OK }"; CHECKS+=("job ${job^^}: ${msg#OK }") ;;
    *)     warn "job ${job^^}: ${msg#SKIP }"; CHECKS+=("job ${job^^}: not checked: ${msg#SKIP }") ;;
  esac
}
if want d; then
  mapfile -t D_FILES < <(find "$DIR" -mindepth 2 -maxdepth 2 -name history.jsonl | sort)
  D_BYTES=$(printf '%s\0' "${D_FILES[@]}" | du -cb --files0-from=- --apparent-size | tail -n 1 | cut -f1)
  DIR_RUNS=${#D_FILES[@]}
  warm "$DIR"
  ((SKIP_LOOPCTL)) || bench d loopctl "loopctl query" "$D_BYTES" "$RUNS" 0 0 -- "$LOOPCTL" query "$DE_SQL" "$DIR" --format csv --quiet
  bench d duckdb DuckDB "$D_BYTES" "$RUNS" 0 0 -- "$PY" "$HERE/duck_de.py" "$DIR/*/history.jsonl"
  bench d polars polars "$D_BYTES" "$RUNS" 0 0 -- "$PY" "$HERE/pol_de.py" "$DIR/*/history.jsonl"
  ((SKIP_LOOPCTL)) || check_de d "$DIR" "$DIR/*/history.jsonl"
fi
if want e || want f; then
  BIG_BYTES=$(fsize "$BIG")
  warm "$BIG"
fi
if want e; then
  ((SKIP_LOOPCTL)) || bench e loopctl "loopctl query" "$BIG_BYTES" "$RUNS" 0 0 -- "$LOOPCTL" query "$DE_SQL" "$BIG" --format csv --quiet
  bench e duckdb DuckDB "$BIG_BYTES" "$RUNS" 0 0 -- "$PY" "$HERE/duck_de.py" "$BIG"
  bench e polars polars "$BIG_BYTES" "$RUNS" 0 0 -- "$PY" "$HERE/pol_de.py" "$BIG"
  ((SKIP_LOOPCTL)) || check_de e "$BIG" "$BIG"
fi
if want f; then
  # Each run starts from an empty folder: a re-run over the same log would write nothing.
  ((SKIP_LOOPCTL)) || bench f loopctl "loopctl export parquet" "$BIG_BYTES" "$RUNS" 0 0 -- \
    bash -c 'rm -rf "$2" && exec "$0" export parquet "$1" --out "$2" --quiet' "$LOOPCTL" "$BIG" "$TMP/lake"
  bench f duckdb "DuckDB COPY TO parquet" "$BIG_BYTES" "$RUNS" 0 0 -- "$PY" "$HERE/duck_export.py" "$BIG" "$TMP/duck.parquet"
fi

# ---------------------------------------------------------------- report ------
table() {
  printf '| job | tool | median s | MB/s | × DuckDB | peak RSS MiB |\n'
  printf '|---|---|---:|---:|---:|---:|\n'
  local r job tool med mbs rss duck ratio
  for r in "${ROWS[@]}"; do
    IFS='|' read -r job tool med mbs rss <<<"$r"
    # DuckDB's MB/s on the same job: the ratio moves less than wall times when the machine is busy.
    duck=$(printf '%s\n' "${ROWS[@]}" | awk -F'|' -v j="$job" '$1 == j && $2 ~ /^DuckDB/ { print $4; exit }')
    ratio=$(awk -v a="$mbs" -v d="$duck" 'BEGIN {
      if (a !~ /^[0-9.]+$/ || d !~ /^[0-9.]+$/ || d == 0) { print "–"; exit }
      r = a / d; printf (r < 0.1 ? "%.3f" : "%.2f"), r }')
    printf '| %s | %s | %s | %s | %s | %s |\n' "$job" "$tool" "$med" "$mbs" "$ratio" "$rss"
  done
}

cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
[[ -n $cpu ]] || cpu=$(lscpu 2>/dev/null | awk -F': *' '/Model name/ { print $2; exit }' || true)
pyver() { "$PY" -c "import $1; print($1.__version__)" 2>/dev/null || echo '?'; }
versions="DuckDB $(pyver duckdb), polars $(pyver polars), $("$PY" --version 2>&1)"
((SKIP_JQ)) || versions="$(jq --version 2>/dev/null), $versions"
if ((!SKIP_LOOPCTL)); then
  lv=$("$LOOPCTL" --version 2>/dev/null | head -n 1 || true)
  rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || true)
  versions="${lv:-loopctl}${rev:+ (commit $rev)}, $versions"
fi

{
  echo "# loopctl benchmark results"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nproc) cores (nproc), CPU ${cpu:-unknown}, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM; CPU busy before the runs: ${BUSY_BEFORE}%, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- tools: $versions"
  if want a || want b; then
    echo "- jobs A, B input: \`$BIG\`, $BIG_BYTES bytes ($(mib "$BIG_BYTES") MiB)"
    [[ $JQ_IN == "$BIG" ]] || echo "- jq input for A, B: its first $JQ_BYTES bytes ($(mib "$JQ_BYTES") MiB), cut at a line end"
  fi
  if want c; then
    echo "- job C input: \`$DIR\`, $DIR_RUNS run folders, $C_BYTES bytes of history.jsonl ($(mib "$C_BYTES") MiB)"
  fi
  if want d; then
    echo "- job D input: \`$DIR\`, $DIR_RUNS run folders, $D_BYTES bytes of history.jsonl ($(mib "$D_BYTES") MiB)"
  fi
  if want e || want f; then
    echo "- jobs E, F input: \`$BIG\`, $BIG_BYTES bytes ($(mib "$BIG_BYTES") MiB)"
  fi
  echo "- $RUNS timed run(s) per tool unless noted; median wall time; MB/s = input bytes / 10^6 / median s; × DuckDB = MB/s over DuckDB's MB/s on the same job; peak RSS = max over the runs (GNU time %M); output to /dev/null; input in the page cache"
  echo
  table
  if ((${#CHECKS[@]})); then
    echo
    echo "Agreement with DuckDB:"
    echo
    printf -- '- %s\n' "${CHECKS[@]}"
  fi
  echo
  echo "Wall time of each run:"
  echo
  printf -- '- %s\n' "${DETAILS[@]}"
  echo
  echo "Command: \`$CMDLINE\`"
} >"$OUT"

echo
table
echo
say "written to $OUT"
((FAILED == 0)) || { warn "some tools failed; see above"; exit 1; }
