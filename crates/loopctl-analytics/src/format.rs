//! Frames as text: table cells, CSV, JSON (an array of objects), NDJSON, and Parquet bytes.

use loopctl_core::Ts;
use polars::prelude::*;
use serde_json::{Number, Value};

use crate::reports::civil;

/// A cell as JSON: numbers stay numbers, times are RFC 3339 (UTC), days `YYYY-MM-DD`.
pub fn json_value(v: &AnyValue<'_>) -> Value {
    let num = |f: f64| Number::from_f64(f).map_or(Value::Null, Value::Number);
    match v {
        AnyValue::Null => Value::Null,
        AnyValue::Boolean(b) => Value::Bool(*b),
        AnyValue::String(s) => Value::String((*s).to_string()),
        AnyValue::StringOwned(s) => Value::String(s.to_string()),
        AnyValue::UInt8(n) => Value::from(*n),
        AnyValue::UInt16(n) => Value::from(*n),
        AnyValue::UInt32(n) => Value::from(*n),
        AnyValue::UInt64(n) => Value::from(*n),
        AnyValue::Int8(n) => Value::from(*n),
        AnyValue::Int16(n) => Value::from(*n),
        AnyValue::Int32(n) => Value::from(*n),
        AnyValue::Int64(n) => Value::from(*n),
        AnyValue::Float32(f) => num(f64::from(*f)),
        AnyValue::Float64(f) => num(*f),
        AnyValue::Date(d) => Value::String(date_text(*d)),
        AnyValue::Datetime(t, unit, _) | AnyValue::DatetimeOwned(t, unit, _) => {
            Value::String(Ts(to_millis(*t, *unit)).to_rfc3339())
        }
        other => Value::String(format!("{other}")),
    }
}

fn to_millis(t: i64, unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Nanoseconds => t.div_euclid(1_000_000),
        TimeUnit::Microseconds => t.div_euclid(1_000),
        TimeUnit::Milliseconds => t,
    }
}

pub fn date_text(days: i32) -> String {
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// A cell as text (empty for null): what the table and CSV show.
pub fn cell_text(v: &AnyValue<'_>) -> String {
    match json_value(v) {
        Value::Null => String::new(),
        Value::String(s) => s,
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_u64() && !n.is_i64() => {
                let r = (f * 1000.0).round() / 1000.0;
                format!("{r}")
            }
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

fn rows(df: &DataFrame) -> impl Iterator<Item = Vec<AnyValue<'_>>> {
    let cols = df.columns();
    (0..df.height()).map(move |i| {
        cols.iter()
            .map(|c| c.get(i).unwrap_or(AnyValue::Null))
            .collect()
    })
}

/// The header and every row as text cells.
pub fn cells(df: &DataFrame) -> (Vec<String>, Vec<Vec<String>>) {
    let head = df
        .get_column_names()
        .iter()
        .map(|c| c.to_string())
        .collect();
    (
        head,
        rows(df)
            .map(|r| r.iter().map(cell_text).collect())
            .collect(),
    )
}

/// One row as a JSON object, its keys in column order; `first` is an extra key put first.
fn object(names: &[&PlSmallStr], row: &[AnyValue<'_>], first: Option<(&str, &str)>) -> String {
    let mut out = String::from("{");
    let mut put = |k: &str, v: &Value| {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&Value::from(k).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    };
    if let Some((k, v)) = first {
        put(k, &Value::from(v));
    }
    for (n, v) in names.iter().zip(row) {
        put(n.as_str(), &json_value(v));
    }
    out.push('}');
    out
}

/// The rows as JSON objects (keys in column order), each with `first` as its first key.
pub fn json_objects(df: &DataFrame, first: Option<(&str, &str)>) -> Vec<String> {
    let names = df.get_column_names();
    rows(df).map(|r| object(&names, &r, first)).collect()
}

/// The rows as one JSON array.
pub fn json_array(df: &DataFrame) -> String {
    format!("[{}]", json_objects(df, None).join(","))
}

/// One JSON object per line.
pub fn ndjson(df: &DataFrame, out: &mut Vec<u8>) {
    for o in json_objects(df, None) {
        out.extend_from_slice(o.as_bytes());
        out.push(b'\n');
    }
}

fn csv_field(s: &str, out: &mut String) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// RFC 4180 CSV with a header line; numbers in full precision.
pub fn csv(df: &DataFrame) -> String {
    let mut out = String::new();
    let line = |fields: Vec<String>, out: &mut String| {
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_field(f, out);
        }
        out.push('\n');
    };
    line(
        df.get_column_names()
            .iter()
            .map(|c| c.to_string())
            .collect(),
        &mut out,
    );
    for r in rows(df) {
        let fields = r
            .iter()
            .map(|v| match json_value(v) {
                Value::Null => String::new(),
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect();
        line(fields, &mut out);
    }
    out
}

/// The frame as a Parquet file (zstd).
pub fn parquet(df: &mut DataFrame) -> PolarsResult<Vec<u8>> {
    let mut out = Vec::new();
    ParquetWriter::new(&mut out)
        .with_compression(ParquetCompression::Zstd(None))
        .finish(df)?;
    Ok(out)
}
