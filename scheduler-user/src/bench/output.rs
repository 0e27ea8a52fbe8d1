//! Where a benchmark run writes its results: a directory (by default
//! `target/bench/<UTC time>/`) with one JSON-lines file per experiment, `<name>.jsonl`,
//! next to the experiment's plots.
//!
//! Every line is one JSON object: one measurement, with the field `experiment` added. An
//! experiment writes through [`ResultsDir::jsonl`] and [`JsonLines::write`]:
//!
//! ```no_run
//! # fn demo() -> anyhow::Result<()> {
//! use scheduler_user::bench::output::ResultsDir;
//! let dir = ResultsDir::create(None)?;
//! let mut lines = dir.jsonl("peers")?;
//! lines.write(&serde_json::json!({ "system": "bolt", "p50_us": 41.0 }))?;
//! lines.finish()?;
//! # Ok(()) }
//! ```

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

/// A directory of results.
#[derive(Clone, Debug)]
pub struct ResultsDir {
    path: PathBuf,
}

impl ResultsDir {
    /// Creates `path`, or `target/bench/<UTC time>` under the current directory.
    pub fn create(path: Option<PathBuf>) -> anyhow::Result<ResultsDir> {
        let path = path.unwrap_or_else(|| Path::new("target").join("bench").join(utc_stamp()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ResultsDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A new (truncated) `<experiment>.jsonl` in this directory.
    pub fn jsonl(&self, experiment: &str) -> anyhow::Result<JsonLines> {
        let path = self.path.join(format!("{experiment}.jsonl"));
        let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(JsonLines { out: BufWriter::new(file), path, experiment: experiment.to_string(), lines: 0 })
    }
}

/// A JSON-lines file being written.
pub struct JsonLines {
    out: BufWriter<File>,
    path: PathBuf,
    experiment: String,
    lines: u64,
}

impl JsonLines {
    /// Writes `record` (which must serialize to a JSON object) as one line, with
    /// `"experiment"` added.
    pub fn write(&mut self, record: &impl Serialize) -> anyhow::Result<()> {
        let mut value = serde_json::to_value(record)?;
        let object = value.as_object_mut().context("a JSON line must be an object")?;
        object.insert("experiment".into(), self.experiment.clone().into());
        serde_json::to_writer(&mut self.out, &value)?;
        self.out.write_all(b"\n")?;
        self.lines += 1;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes the file; returns its path and the number of lines.
    pub fn finish(mut self) -> anyhow::Result<(PathBuf, u64)> {
        self.out.flush().with_context(|| format!("writing {}", self.path.display()))?;
        Ok((self.path, self.lines))
    }
}

/// `2026-11-22T04-44-11Z`: the current UTC time, usable in file names.
pub fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}-{:02}-{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Year, month, day of a count of days since 1970-01-01 (proleptic Gregorian calendar;
/// H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_days_since_the_epoch() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
    }

    #[test]
    fn every_line_is_an_object_naming_its_experiment() {
        let dir = std::env::temp_dir().join(format!("bolt-jsonl-{}", std::process::id()));
        let results = ResultsDir::create(Some(dir.clone())).unwrap();
        let mut lines = results.jsonl("sw1").unwrap();
        lines.write(&serde_json::json!({ "level": "one-level", "p50": 1.5 })).unwrap();
        assert!(lines.write(&3).is_err(), "a number is not a record");
        let (path, n) = lines.finish().unwrap();
        assert_eq!(n, 1);
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!((v["experiment"].as_str(), v["p50"].as_f64()), (Some("sw1"), Some(1.5)));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
