//! What a query reads: which tables, and which of their columns, found by planning it over
//! empty tables and reading the scans of polars' optimized plan (projection pushdown names the
//! columns each scan must give). `collect` then skips what no column read needs: a table, the
//! stagnation assessment, matching scores to phases.

use polars::prelude::*;
use polars_plan::plans::IR;

use crate::tables::{self, Tables};

/// The columns of one table a query reads: `None` for all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns(Option<Vec<String>>);

impl Columns {
    pub fn all() -> Columns {
        Columns(None)
    }

    /// Just these columns.
    pub fn only(names: &[&str]) -> Columns {
        Columns(Some(names.iter().map(|n| n.to_string()).collect()))
    }

    pub fn reads(&self, column: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|c| c.iter().any(|n| n == column))
    }

    /// Every column of `df` but `skip`.
    pub fn all_but(df: &DataFrame, skip: &[&str]) -> Columns {
        Columns(Some(
            df.get_column_names()
                .iter()
                .map(|n| n.to_string())
                .filter(|n| !skip.contains(&n.as_str()))
                .collect(),
        ))
    }

    /// These columns and `name`.
    pub fn with(mut self, name: &str) -> Columns {
        if let Some(c) = &mut self.0 {
            c.push(name.to_string());
        }
        self
    }

    fn add(&mut self, other: Columns) {
        match (&mut self.0, other.0) {
            (Some(a), Some(b)) => a.extend(b),
            (a, _) => *a = None,
        }
    }
}

/// Per table, the columns read, or `None` when the table is not read at all.
#[derive(Debug, Clone, PartialEq)]
pub struct Needs {
    pub runs: Option<Columns>,
    pub phases: Option<Columns>,
    pub events: Option<Columns>,
}

impl Needs {
    /// Every column of every table.
    pub fn all() -> Needs {
        Needs {
            runs: Some(Columns::all()),
            phases: Some(Columns::all()),
            events: Some(Columns::all()),
        }
    }

    /// The runs and phases tables whole, no events (the reports read no events).
    pub fn runs_and_phases() -> Needs {
        Needs {
            events: None,
            ..Needs::all()
        }
    }

    pub fn runs_reads(&self, column: &str) -> bool {
        self.runs.as_ref().is_some_and(|c| c.reads(column))
    }

    pub fn phases_reads(&self, column: &str) -> bool {
        self.phases.as_ref().is_some_and(|c| c.reads(column))
    }

    /// What `sql` reads. An error is a query polars cannot plan (its message names the
    /// offending part); a plan this cannot read needs everything.
    pub fn of_sql(sql: &str) -> crate::Result<Needs> {
        let empty = Tables::empty()?;
        let lf = crate::context(&empty).execute(sql)?;
        Ok(needs_of_plan(lf).unwrap_or_else(|_| Needs::all()))
    }
}

/// The table a scan reads, told by a column only it has.
fn table_of(schema: &Schema) -> Option<&'static str> {
    [
        ("runs", "iterations"),
        ("phases", "attempt"),
        ("events", "seq"),
    ]
    .into_iter()
    .find(|(_, c)| schema.contains(c))
    .map(|(t, _)| t)
}

fn needs_of_plan(lf: LazyFrame) -> PolarsResult<Needs> {
    let plan = lf.to_alp_optimized()?;
    let mut needs = Needs {
        runs: None,
        phases: None,
        events: None,
    };
    let mut stack = vec![plan.lp_top];
    while let Some(node) = stack.pop() {
        let ir = plan.lp_arena.get(node);
        if let IR::DataFrameScan {
            schema,
            output_schema,
            ..
        } = ir
        {
            let cols = Columns(
                output_schema
                    .as_ref()
                    .map(|s| s.iter_names().map(|n| n.to_string()).collect()),
            );
            let slot = match table_of(schema) {
                Some("runs") => &mut needs.runs,
                Some("phases") => &mut needs.phases,
                Some("events") => &mut needs.events,
                _ => return Ok(Needs::all()),
            };
            match slot {
                Some(c) => c.add(cols),
                None => *slot = Some(cols),
            }
        }
        stack.extend(ir.inputs());
    }
    Ok(needs)
}

impl Tables {
    /// The three tables with no rows.
    pub fn empty() -> PolarsResult<Tables> {
        Ok(Tables {
            runs: tables::runs(&[])?,
            phases: tables::phases_empty()?,
            events: tables::events(&[])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(c: &Option<Columns>) -> Option<Vec<String>> {
        c.as_ref().map(|c| {
            let mut v = c.0.clone().unwrap_or_else(|| vec!["*".into()]);
            v.sort();
            v.dedup();
            v
        })
    }

    /// Job D/E of bench/compare.sh.
    const DE_SQL: &str = "WITH r AS (SELECT loop, count(*) AS runs, avg(CAST(passed AS DOUBLE)) AS success_rate FROM runs GROUP BY loop), p AS (SELECT loop, quantile_cont(duration_ms, 0.95) AS p95_ms FROM phases GROUP BY loop) SELECT r.loop, r.runs, r.success_rate, p.p95_ms FROM r JOIN p ON r.loop = p.loop ORDER BY r.loop";

    #[test]
    fn a_query_needs_the_tables_and_columns_it_reads() {
        let n = Needs::of_sql(DE_SQL).unwrap();
        assert_eq!(cols(&n.runs), Some(vec!["loop".into(), "passed".into()]));
        assert_eq!(
            cols(&n.phases),
            Some(vec!["duration_ms".into(), "loop".into()])
        );
        assert_eq!(n.events, None);
        assert!(!n.runs_reads("stagnation"));
        assert!(!n.phases_reads("score"));
    }

    #[test]
    fn star_and_names_inside_expressions_count() {
        let n = Needs::of_sql("SELECT * FROM runs").unwrap();
        assert!(n.runs_reads("stagnation") && n.phases.is_none() && n.events.is_none());
        let n = Needs::of_sql(
            "SELECT r.loop FROM runs r JOIN phases p ON r.run_id = p.run_id \
             WHERE p.score > 0.5 AND r.stagnation IS NOT NULL",
        )
        .unwrap();
        assert!(n.runs_reads("stagnation") && n.phases_reads("score"));
        assert!(!n.phases_reads("passed") && n.events.is_none());
        // A table named only in a string is not read.
        let n = Needs::of_sql("SELECT 'events' AS t, count(*) FROM phases").unwrap();
        assert!(n.events.is_none() && n.runs.is_none() && n.phases.is_some());
        let n = Needs::of_sql("SELECT event, count(*) FROM events GROUP BY event").unwrap();
        assert!(n.events.is_some() && n.runs.is_none() && n.phases.is_none());
    }

    #[test]
    fn a_bad_query_is_an_error_before_any_log_is_read() {
        let e = Needs::of_sql("SELECT nope FROM runs").unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
