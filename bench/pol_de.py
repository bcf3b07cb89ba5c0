#!/usr/bin/env python3
"""pol_de.py PATH_OR_GLOB -- jobs D/E with polars (lazy scan_ndjson, explicit schema): the
same answer as duck_de.py."""
import sys, polars as pl
src = sys.argv[1]
schema = {"run_id": pl.String, "seq": pl.Int64, "ts": pl.String, "iteration": pl.Int32,
          "phase": pl.String, "step": pl.String, "event": pl.String, "status": pl.String,
          "payload": pl.Struct({"reason": pl.String})}
PASS = ["threshold_reached", "no_major_issues", "goal_met", "passed", "goto_end"]
loop = pl.col("run_id").str.replace(r"-[0-9]{8}-[0-9]{6}.*$", "")
e = (pl.scan_ndjson(src, schema=schema)
     .with_columns(pl.col("ts").str.to_datetime(time_zone="UTC").dt.epoch("ms").alias("t"),
                   pl.col("payload").struct.field("reason").str.split(" ").list.first().alias("reason"))
     .sort("run_id", "seq"))
prev = lambda c: pl.col(c).shift(1).over("run_id")
d = e.with_columns((pl.col("t") - prev("t")).alias("dur"),
                   ((prev("step") != pl.col("step")) | (prev("iteration") != pl.col("iteration"))
                    | (prev("phase") != pl.col("phase"))
                    | prev("step").is_null()).fill_null(True).cast(pl.Int64).alias("brk"))
steps = (d.filter(pl.col("step").is_not_null())
         .with_columns(pl.col("brk").cum_sum().over("run_id").alias("grp"))
         .group_by("run_id", "grp").agg(pl.when(pl.col("dur").is_not_null().any()).then(pl.col("dur").sum()).alias("dur"))
         .group_by(loop.alias("loop")).agg(pl.col("dur").quantile(0.95, "linear").alias("p95_ms")))
stop = pl.col("event").is_in(["stopped", "failed"])
runs = (e.group_by("run_id").agg(pl.col("reason").filter(stop).last().alias("stop"))
        .with_columns(pl.when(pl.col("stop").is_null()).then(None)
                      .otherwise(pl.col("stop").is_in(PASS).cast(pl.Float64)).alias("ok"))
        .group_by(loop.alias("loop")).agg(pl.len().alias("runs"), pl.col("ok").mean().alias("success_rate")))
df = runs.join(steps, on="loop").sort("loop").collect()
df.write_csv(sys.stdout, include_header=False)
print(f"rows={df.height}", file=sys.stderr)
