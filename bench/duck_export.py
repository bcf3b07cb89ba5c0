#!/usr/bin/env python3
"""duck_export.py LOG OUT.parquet -- job F: DuckDB's COPY of the log's events to Parquet (zstd),
the columns of loopctl's `events` table."""
import sys, duckdb
src, out = sys.argv[1], sys.argv[2]
rel = (f"read_ndjson('{src}', columns={{run_id:'VARCHAR', seq:'BIGINT', ts:'VARCHAR', iteration:'INTEGER', "
       f"phase:'VARCHAR', step:'VARCHAR', event:'VARCHAR', status:'VARCHAR', payload:'JSON'}})")
duckdb.connect().execute(
    f"COPY (SELECT run_id, seq, CAST(ts AS TIMESTAMPTZ) AS ts, event, iteration, phase, step, status, "
    f"CAST(payload AS VARCHAR) AS payload FROM {rel}) TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
