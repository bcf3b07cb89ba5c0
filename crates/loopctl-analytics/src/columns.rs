//! Column builders: a table's rows pushed straight into its columns, no row structs between.
//! Text columns keep each distinct string of a batch once (a run's id, loop and source repeat
//! on every one of its phases): rows share its bytes.

use polars::prelude::*;
use polars_arrow::array::{Utf8ViewArray, View};
use polars_arrow::bitmap::MutableBitmap;
use polars_arrow::datatypes::ArrowDataType;
use rustc_hash::FxHashMap;

use crate::rows::Usage;

/// A text column whose long strings are stored once each.
#[derive(Default)]
pub struct Text {
    views: Vec<View>,
    bytes: Vec<u8>,
    /// Set once the first null comes: all rows before it are valid.
    validity: Option<MutableBitmap>,
    seen: FxHashMap<Box<str>, View>,
}

impl Text {
    pub fn push(&mut self, s: Option<&str>) {
        let Some(s) = s else {
            let valid = self.views.len();
            self.validity
                .get_or_insert_with(|| {
                    let mut v = MutableBitmap::with_capacity(valid + 1);
                    v.extend_constant(valid, true);
                    v
                })
                .push(false);
            self.views.push(View::default());
            return;
        };
        if let Some(v) = &mut self.validity {
            v.push(true);
        }
        let view = if s.len() <= View::MAX_INLINE_SIZE as usize {
            View::new_inline(s.as_bytes())
        } else if let Some(v) = self.seen.get(s) {
            *v
        } else {
            let v = View::new_from_bytes(s.as_bytes(), 0, self.bytes.len() as u32);
            self.bytes.extend_from_slice(s.as_bytes());
            self.seen.insert(s.into(), v);
            v
        };
        self.views.push(view);
    }

    pub fn finish(self, name: &str) -> PolarsResult<Column> {
        let arr = Utf8ViewArray::try_new(
            ArrowDataType::Utf8View,
            self.views.into(),
            vec![self.bytes.into()].into(),
            self.validity.map(Into::into),
        )?;
        Ok(StringChunked::with_chunk(name.into(), arr)
            .into_series()
            .into_column())
    }
}

fn col<T>(name: &str, v: Vec<T>) -> Column
where
    Series: NamedFrom<Vec<T>, [T]>,
{
    Series::new(name.into(), v).into_column()
}

fn time(name: &str, v: Vec<Option<i64>>) -> PolarsResult<Column> {
    Ok(Series::new(name.into(), v)
        .cast(&DataType::Datetime(TimeUnit::Milliseconds, None))?
        .into_column())
}

fn day(v: Vec<Option<i32>>) -> PolarsResult<Column> {
    Ok(Series::new("day".into(), v)
        .cast(&DataType::Date)?
        .into_column())
}

/// One row of `phases`, as its builder takes it (strings borrowed).
pub struct Phase<'a> {
    pub run_id: &'a str,
    pub loop_name: &'a str,
    pub iteration: Option<u64>,
    pub phase: &'a str,
    pub kind: Option<&'a str>,
    pub quality_phase: Option<&'a str>,
    pub attempt: u64,
    pub started: Option<i64>,
    pub ended: Option<i64>,
    pub duration_ms: Option<u64>,
    pub outcome: &'static str,
    pub stop_reason: Option<&'a str>,
    pub exit_code: Option<i64>,
    pub marker: Option<&'a str>,
    pub score: Option<f64>,
    pub passed: Option<bool>,
    pub usage: Option<&'a Usage>,
    pub derived: bool,
    pub source: &'a str,
    pub day: Option<i32>,
}

/// The columns of `phases` (docs/analytics.md), filled a row at a time.
#[derive(Default)]
pub struct Phases {
    run_id: Text,
    loop_name: Text,
    iteration: Vec<Option<u64>>,
    phase: Text,
    kind: Text,
    quality_phase: Text,
    attempt: Vec<u64>,
    started: Vec<Option<i64>>,
    ended: Vec<Option<i64>>,
    duration_ms: Vec<Option<u64>>,
    outcome: Text,
    stop_reason: Text,
    exit_code: Vec<Option<i64>>,
    marker: Text,
    score: Vec<Option<f64>>,
    passed: Vec<Option<bool>>,
    input_tokens: Vec<Option<u64>>,
    output_tokens: Vec<Option<u64>>,
    cache_read_tokens: Vec<Option<u64>>,
    cache_creation_tokens: Vec<Option<u64>>,
    cost_usd: Vec<Option<f64>>,
    turns: Vec<Option<u64>>,
    model: Text,
    derived: Vec<bool>,
    source: Text,
    day: Vec<Option<i32>>,
}

impl Phases {
    pub fn len(&self) -> usize {
        self.attempt.len()
    }

    pub fn is_empty(&self) -> bool {
        self.attempt.is_empty()
    }

    pub fn push(&mut self, p: Phase<'_>) {
        self.run_id.push(Some(p.run_id));
        self.loop_name.push(Some(p.loop_name));
        self.iteration.push(p.iteration);
        self.phase.push(Some(p.phase));
        self.kind.push(p.kind);
        self.quality_phase.push(p.quality_phase);
        self.attempt.push(p.attempt);
        self.started.push(p.started);
        self.ended.push(p.ended);
        self.duration_ms.push(p.duration_ms);
        self.outcome.push(Some(p.outcome));
        self.stop_reason.push(p.stop_reason);
        self.exit_code.push(p.exit_code);
        self.marker.push(p.marker);
        self.score.push(p.score);
        self.passed.push(p.passed);
        let u = p.usage;
        self.input_tokens.push(u.and_then(|u| u.input_tokens));
        self.output_tokens.push(u.and_then(|u| u.output_tokens));
        self.cache_read_tokens
            .push(u.and_then(|u| u.cache_read_tokens));
        self.cache_creation_tokens
            .push(u.and_then(|u| u.cache_creation_tokens));
        self.cost_usd.push(u.and_then(|u| u.cost_usd));
        self.turns.push(u.and_then(|u| u.turns));
        self.model.push(u.and_then(|u| u.model.as_deref()));
        self.derived.push(p.derived);
        self.source.push(Some(p.source));
        self.day.push(p.day);
    }

    pub fn finish(self) -> PolarsResult<DataFrame> {
        let n = self.len();
        let cols = vec![
            self.run_id.finish("run_id")?,
            self.loop_name.finish("loop")?,
            col("iteration", self.iteration),
            self.phase.finish("phase")?,
            self.kind.finish("kind")?,
            self.quality_phase.finish("quality_phase")?,
            col("attempt", self.attempt),
            time("started", self.started)?,
            time("ended", self.ended)?,
            col("duration_ms", self.duration_ms),
            self.outcome.finish("outcome")?,
            self.stop_reason.finish("stop_reason")?,
            col("exit_code", self.exit_code),
            self.marker.finish("marker")?,
            col("score", self.score),
            col("passed", self.passed),
            col("input_tokens", self.input_tokens),
            col("output_tokens", self.output_tokens),
            col("cache_read_tokens", self.cache_read_tokens),
            col("cache_creation_tokens", self.cache_creation_tokens),
            col("cost_usd", self.cost_usd),
            col("turns", self.turns),
            self.model.finish("model")?,
            col("derived", self.derived),
            self.source.finish("source")?,
            day(self.day)?,
        ];
        DataFrame::new(n, cols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_keeps_values_and_nulls_in_order_and_long_strings_once() {
        let long = "a-run-id-longer-than-twelve-bytes";
        let vals = [
            Some(long),
            Some("short"),
            None,
            Some(long),
            Some("another long string here"),
            None,
            Some(long),
        ];
        let mut t = Text::default();
        for v in vals {
            t.push(v);
        }
        assert_eq!(t.bytes.len(), long.len() + "another long string here".len());
        let c = t.finish("x").unwrap();
        let got: Vec<Option<&str>> = c.str().unwrap().iter().collect();
        assert_eq!(got, vals);
        let mut t = Text::default();
        t.push(Some(long));
        let c = t.finish("x").unwrap();
        assert_eq!(c.null_count(), 0);
    }
}
