//! `export parquet`: the three tables as Hive-style partitions by day
//! (`runs/day=2026-11-21/part-0.parquet`), each file replaced atomically and only when its
//! bytes change.

use std::io::Write;
use std::path::{Path, PathBuf};

use atomic_write_file::AtomicWriteFile;
use polars::prelude::*;

use crate::format::{date_text, parquet};
use crate::tables::Tables;
use crate::{Error, Result};

/// The partition of rows with no day (no timestamp), as Hive tools name it.
pub const NO_DAY: &str = "__HIVE_DEFAULT_PARTITION__";

/// What an export did.
#[derive(Debug, Default, PartialEq)]
pub struct Exported {
    /// Partition files written (new or changed).
    pub written: Vec<PathBuf>,
    /// Partition files left as they were (same bytes).
    pub unchanged: Vec<PathBuf>,
}

/// Writes `runs`, `phases` and `events` under `out`.
pub fn export(t: &Tables, out: &Path) -> Result<Exported> {
    let mut done = Exported::default();
    for (name, df) in [
        ("runs", &t.runs),
        ("phases", &t.phases),
        ("events", &t.events),
    ] {
        for (day, mut part) in by_day(df)? {
            let file = out
                .join(name)
                .join(format!("day={day}"))
                .join("part-0.parquet");
            let bytes = parquet(&mut part)?;
            if std::fs::read(&file).is_ok_and(|old| old == bytes) {
                done.unchanged.push(file);
                continue;
            }
            write_atomic(&file, &bytes)?;
            done.written.push(file);
        }
    }
    Ok(done)
}

/// The frame's rows split by their `day`, in day order, without the `day` column (the
/// partition's folder carries it).
fn by_day(df: &DataFrame) -> Result<Vec<(String, DataFrame)>> {
    let days = df.column("day")?.cast(&DataType::Int32)?;
    let mut groups: std::collections::BTreeMap<Option<i32>, Vec<IdxSize>> = Default::default();
    for (i, d) in days.i32()?.iter().enumerate() {
        groups.entry(d).or_default().push(i as IdxSize);
    }
    let rest = df.drop("day")?;
    groups
        .into_iter()
        .map(|(d, idx)| {
            let part = rest.take(&IdxCa::from_vec("idx".into(), idx))?;
            Ok((d.map_or_else(|| NO_DAY.to_string(), date_text), part))
        })
        .collect()
}

fn write_atomic(file: &Path, bytes: &[u8]) -> Result<()> {
    let io = |e: std::io::Error| Error::Io {
        path: file.to_path_buf(),
        cause: e,
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut f = AtomicWriteFile::open(file).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.commit().map_err(io)
}
