#!/usr/bin/env python3
"""duck_de.py PATH_OR_GLOB -- jobs D/E in DuckDB: success rate and p95 phase duration by loop.

The same answer `loopctl query` gives over aif-loop logs: a run's loop is its id without the
timestamp suffix; it passed when its last stop's reason is a passing one (of the runs that
stopped); a phase (step) lasts from the run's previous event to its last one, consecutive
events of one step in one iteration and quality phase being one step.
"""
import sys, duckdb
src = sys.argv[1]
rel = (f"read_ndjson('{src}', columns={{run_id:'VARCHAR', seq:'BIGINT', ts:'VARCHAR', iteration:'INTEGER', phase:'VARCHAR', "
       f"step:'VARCHAR', event:'VARCHAR', status:'VARCHAR', payload:'STRUCT(reason VARCHAR)'}})")
q = f"""
WITH e AS (
  SELECT run_id, seq, iteration, phase, step, event, status, payload.reason AS reason,
         epoch_ms(CAST(ts AS TIMESTAMPTZ)) AS t
  FROM {rel}),
d AS (
  SELECT *, t - lag(t) OVER w AS dur,
         CASE WHEN lag(step) OVER w IS NOT DISTINCT FROM step
               AND lag(iteration) OVER w IS NOT DISTINCT FROM iteration
               AND lag(phase) OVER w IS NOT DISTINCT FROM phase THEN 0 ELSE 1 END AS brk
  FROM e WINDOW w AS (PARTITION BY run_id ORDER BY seq)),
g AS (SELECT *, sum(brk) OVER (PARTITION BY run_id ORDER BY seq) AS grp FROM d WHERE step IS NOT NULL),
steps AS (SELECT run_id, grp, sum(dur) AS dur FROM g GROUP BY run_id, grp),
runs AS (
  SELECT run_id, regexp_replace(run_id, '-[0-9]{{8}}-[0-9]{{6}}.*$', '') AS loop,
         arg_max(split_part(reason, ' ', 1), seq) FILTER (WHERE event IN ('stopped', 'failed')) AS stop
  FROM e GROUP BY run_id),
r AS (
  SELECT loop, count(*) AS runs,
         avg(CASE WHEN stop IS NULL THEN NULL
                  WHEN stop IN ('threshold_reached', 'no_major_issues', 'goal_met', 'passed', 'goto_end') THEN 1.0
                  ELSE 0.0 END) AS success_rate
  FROM runs GROUP BY loop),
p AS (
  SELECT regexp_replace(run_id, '-[0-9]{{8}}-[0-9]{{6}}.*$', '') AS loop,
         quantile_cont(dur, 0.95) AS p95_ms
  FROM steps GROUP BY 1)
SELECT r.loop, r.runs, r.success_rate, p.p95_ms FROM r JOIN p ON r.loop = p.loop ORDER BY r.loop
"""
rows = duckdb.connect().execute(q).fetchall()
for r in rows:
    sys.stdout.write(",".join("" if v is None else str(v) for v in r) + "\n")
print(f"rows={len(rows)}", file=sys.stderr)
