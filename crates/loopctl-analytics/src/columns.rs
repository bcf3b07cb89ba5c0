//! Column builders: a table's rows pushed straight into its columns, no row structs between.
//! Text columns keep each distinct string of a batch once (a run's id, loop and source repeat
//! on every one of its phases): rows share its bytes.

use polars::prelude::*;
use polars_arrow::array::{Utf8ViewArray, View};
use polars_arrow::bitmap::MutableBitmap;
use polars_arrow::datatypes::ArrowDataType;
use rustc_hash::FxHashMap;

use crate::needs::Columns;
use crate::rows::Usage;

const BUFFER_MAX: usize = 2 << 30;

/// A text column whose long strings are stored once each. Off (`Text::off`), it keeps
/// nothing and gives nulls.
#[derive(Default)]
pub struct Text {
    off: bool,
    len: usize,
    views: Vec<View>,
    /// The long strings' bytes; a view's offset is 32 bits, so a new buffer past 2 GiB.
    buffers: Vec<Vec<u8>>,
    /// Set once the first null comes: all rows before it are valid.
    validity: Option<MutableBitmap>,
    seen: FxHashMap<Box<str>, View>,
    /// The last long string pushed: a run's rows repeat it, and a compare beats a hash.
    last: Option<(Box<str>, View)>,
}

impl Text {
    pub fn off() -> Text {
        Text {
            off: true,
            ..Text::default()
        }
    }

    pub fn push(&mut self, s: Option<&str>) {
        self.len += 1;
        if self.off {
            return;
        }
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
        } else if let Some((l, v)) = &self.last
            && **l == *s
        {
            *v
        } else {
            let v = match self.seen.get(s) {
                Some(v) => *v,
                None => {
                    if self
                        .buffers
                        .last()
                        .is_none_or(|b| b.len() + s.len() > BUFFER_MAX)
                    {
                        self.buffers.push(Vec::new());
                    }
                    let idx = self.buffers.len() - 1;
                    let b = &mut self.buffers[idx];
                    let v = View::new_from_bytes(s.as_bytes(), idx as u32, b.len() as u32);
                    b.extend_from_slice(s.as_bytes());
                    self.seen.insert(s.into(), v);
                    v
                }
            };
            self.last = Some((s.into(), v));
            v
        };
        self.views.push(view);
    }

    pub fn finish(self, name: &str) -> PolarsResult<Column> {
        if self.off {
            return Ok(Column::full_null(name.into(), self.len, &DataType::String));
        }
        let arr = Utf8ViewArray::try_new(
            ArrowDataType::Utf8View,
            self.views.into(),
            self.buffers
                .into_iter()
                .map(Into::into)
                .collect::<Vec<_>>()
                .into(),
            self.validity.map(Into::into),
        )?;
        Ok(StringChunked::with_chunk(name.into(), arr)
            .into_series()
            .into_column())
    }
}

/// A column of values, or (off) of nulls only: a column no query reads is not kept.
pub struct Values<T> {
    on: bool,
    len: usize,
    v: Vec<T>,
}

impl<T> Values<T> {
    pub fn new(on: bool) -> Values<T> {
        Values {
            on,
            len: 0,
            v: Vec::new(),
        }
    }

    pub fn push(&mut self, x: T) {
        self.len += 1;
        if self.on {
            self.v.push(x);
        }
    }

    fn column(self, name: &str, dtype: DataType) -> PolarsResult<Column>
    where
        Series: NamedFrom<Vec<T>, [T]>,
    {
        if !self.on {
            return Ok(Column::full_null(name.into(), self.len, &dtype));
        }
        Ok(Series::new(name.into(), self.v).cast(&dtype)?.into_column())
    }
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
pub struct Phases {
    run_id: Text,
    loop_name: Text,
    iteration: Values<Option<u64>>,
    phase: Text,
    kind: Text,
    quality_phase: Text,
    attempt: Values<u64>,
    started: Values<Option<i64>>,
    ended: Values<Option<i64>>,
    duration_ms: Values<Option<u64>>,
    outcome: Text,
    stop_reason: Text,
    exit_code: Values<Option<i64>>,
    marker: Text,
    score: Values<Option<f64>>,
    passed: Values<Option<bool>>,
    input_tokens: Values<Option<u64>>,
    output_tokens: Values<Option<u64>>,
    cache_read_tokens: Values<Option<u64>>,
    cache_creation_tokens: Values<Option<u64>>,
    cost_usd: Values<Option<f64>>,
    turns: Values<Option<u64>>,
    model: Text,
    derived: Values<bool>,
    source: Text,
    day: Values<Option<i32>>,
}

impl Phases {
    /// The builder of the columns `c` names; the others are null.
    pub fn new(c: &Columns) -> Phases {
        let t = |n| {
            if c.reads(n) {
                Text::default()
            } else {
                Text::off()
            }
        };
        let v = |n| c.reads(n);
        Phases {
            run_id: t("run_id"),
            loop_name: t("loop"),
            iteration: Values::new(v("iteration")),
            phase: t("phase"),
            kind: t("kind"),
            quality_phase: t("quality_phase"),
            attempt: Values::new(v("attempt")),
            started: Values::new(v("started")),
            ended: Values::new(v("ended")),
            duration_ms: Values::new(v("duration_ms")),
            outcome: t("outcome"),
            stop_reason: t("stop_reason"),
            exit_code: Values::new(v("exit_code")),
            marker: t("marker"),
            score: Values::new(v("score")),
            passed: Values::new(v("passed")),
            input_tokens: Values::new(v("input_tokens")),
            output_tokens: Values::new(v("output_tokens")),
            cache_read_tokens: Values::new(v("cache_read_tokens")),
            cache_creation_tokens: Values::new(v("cache_creation_tokens")),
            cost_usd: Values::new(v("cost_usd")),
            turns: Values::new(v("turns")),
            model: t("model"),
            derived: Values::new(v("derived")),
            source: t("source"),
            day: Values::new(v("day")),
        }
    }

    pub fn len(&self) -> usize {
        self.derived.len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        use DataType::*;
        let n = self.len();
        let time = || Datetime(TimeUnit::Milliseconds, None);
        let cols = vec![
            self.run_id.finish("run_id")?,
            self.loop_name.finish("loop")?,
            self.iteration.column("iteration", UInt64)?,
            self.phase.finish("phase")?,
            self.kind.finish("kind")?,
            self.quality_phase.finish("quality_phase")?,
            self.attempt.column("attempt", UInt64)?,
            self.started.column("started", time())?,
            self.ended.column("ended", time())?,
            self.duration_ms.column("duration_ms", UInt64)?,
            self.outcome.finish("outcome")?,
            self.stop_reason.finish("stop_reason")?,
            self.exit_code.column("exit_code", Int64)?,
            self.marker.finish("marker")?,
            self.score.column("score", Float64)?,
            self.passed.column("passed", Boolean)?,
            self.input_tokens.column("input_tokens", UInt64)?,
            self.output_tokens.column("output_tokens", UInt64)?,
            self.cache_read_tokens.column("cache_read_tokens", UInt64)?,
            self.cache_creation_tokens
                .column("cache_creation_tokens", UInt64)?,
            self.cost_usd.column("cost_usd", Float64)?,
            self.turns.column("turns", UInt64)?,
            self.model.finish("model")?,
            self.derived.column("derived", Boolean)?,
            self.source.finish("source")?,
            self.day.column("day", Date)?,
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
        let stored: usize = t.buffers.iter().map(Vec::len).sum();
        assert_eq!(stored, long.len() + "another long string here".len());
        let c = t.finish("x").unwrap();
        let got: Vec<Option<&str>> = c.str().unwrap().iter().collect();
        assert_eq!(got, vals);
        let mut t = Text::default();
        t.push(Some(long));
        let c = t.finish("x").unwrap();
        assert_eq!(c.null_count(), 0);
    }
}
