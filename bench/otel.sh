#!/usr/bin/env bash
# OpenTelemetry export costs (issue 19 §3), against a local OTLP/HTTP sink that answers every
# POST at once (bench/otlp_sink.py), so what is measured is loopctl's side:
#   1. `export otel` of the 10,000-run folder and of a large log: spans per second, peak RSS;
#   2. the runner per phase with live export on, beside off (target: within 0.5 ms per phase).
#   bench/otel.sh [--dir DIR] [--log FILE] [--phases N] [--runs R]
# Defaults: ../benchdata/dir10k and ../benchdata/big.jsonl beside the repository (as
# bench/compare.sh), 1000 phases, 5 runs. Builds the release binary (LOOPCTL_BIN overrides).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$here/../benchdata/dir10k log=$here/../benchdata/big.jsonl phases=1000 runs=5
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--dir DIR] [--log FILE] [--phases N] [--runs R]" >&2; exit 2 ;;
  esac
done
[ -n "${LOOPCTL_BIN:-}" ] || cargo build --release -q -p loopctl --manifest-path "$here/Cargo.toml"
bin=${LOOPCTL_BIN:-$here/target/release/loopctl}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$here/bench/otlp_sink.py" "$port" & sink=$!
trap 'kill $sink 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
endpoint="http://127.0.0.1:$port"

now() { date +%s.%N; }
calc() { awk "BEGIN {printf \"%.6f\", $1}"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

export_one() { # label path
  local t0 t1 spans rss
  t0=$(now)
  /usr/bin/time -f '%M' -o "$work/rss" "$bin" export otel "$2" --endpoint "$endpoint" --json > "$work/out.json" 2> "$work/err"
  t1=$(now)
  spans=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spans"])' "$work/out.json")
  rss=$(tail -1 "$work/rss")
  printf '  %-28s %9d spans  %7.2f s  %9.0f spans/s  peak RSS %6.1f MiB\n' \
    "$1" "$spans" "$(calc "$t1 - $t0")" "$(calc "$spans / ($t1 - $t0)")" "$(calc "$rss / 1024")"
}

echo "export otel into a local sink ($bin)"
[ -d "$dir" ] && export_one "$(basename "$dir") ($(ls "$dir" | wc -l) runs)" "$dir"
[ -f "$log" ] && export_one "$(basename "$log") ($(du -h "$log" | cut -f1))" "$log"

printf '{"max_iterations":%d,"loop":[{"name":"t","run":"true"}]}\n' "$phases" > "$work/loop.json"
off=() on=()
timed() { # root [flags...]: seconds of one run
  local t0 t1 root=$1; shift
  t0=$(now); "$bin" run -q --loop-file "$work/loop.json" --root "$root" --dir "$work" "$@"; t1=$(now)
  calc "$t1 - $t0"
}
for r in $(seq "$runs"); do
  # Alternate which goes first, so neither is always the one with warm caches.
  if [ $((r % 2)) -eq 1 ]; then
    off+=("$(timed "$work/off$r")"); on+=("$(timed "$work/on$r" --otlp-endpoint "$endpoint")")
  else
    on+=("$(timed "$work/on$r" --otlp-endpoint "$endpoint")"); off+=("$(timed "$work/off$r")")
  fi
done
off_m=$(printf '%s\n' "${off[@]}" | median)
on_m=$(printf '%s\n' "${on[@]}" | median)
per_off=$(calc "$off_m * 1000 / $phases")
per_on=$(calc "$on_m * 1000 / $phases")
over=$(calc "$per_on - $per_off")
printf '%d phases of `true`, median of %d runs\n' "$phases" "$runs"
printf '  live export off  %6.2f s  %6.3f ms/phase\n' "$off_m" "$per_off"
printf '  live export on   %6.2f s  %6.3f ms/phase\n' "$on_m" "$per_on"
printf '  overhead         %6.3f ms/phase (target < 0.5 ms): %s\n' "$over" "$(awk "BEGIN {print ($over < 0.5) ? \"met\" : \"NOT met\"}")"
