//! How the `bolt` commands print what they report: a table, or JSON with -j/-p. Kept apart
//! from the XDP inspection commands so that the switch's stats command (and the library
//! without the CLI's dependencies) can use it.

use serde::Serialize;

/// The output options every inspection command takes (before or after the object).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct OutputArgs {
    /// Print JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
    /// Print indented JSON (implies --json).
    #[arg(short = 'p', long)]
    pub pretty: bool,
    /// Show the paths of pinned objects.
    #[arg(short = 'f', long)]
    pub bpffs: bool,
}

impl OutputArgs {
    /// The options given before the object and after it, together.
    pub fn merge(self, other: OutputArgs) -> OutputArgs {
        OutputArgs {
            json: self.json || other.json,
            pretty: self.pretty || other.pretty,
            bpffs: self.bpffs || other.bpffs,
        }
    }

    pub fn is_json(&self) -> bool {
        self.json || self.pretty
    }

    /// Prints `value` as JSON (compact or pretty) or, without -j/-p, as `text` renders it.
    pub fn print<T: Serialize>(&self, value: &T, text: impl FnOnce(&T) -> String) -> anyhow::Result<()> {
        let out = if self.pretty {
            serde_json::to_string_pretty(value)?
        } else if self.json {
            serde_json::to_string(value)?
        } else {
            text(value)
        };
        use std::io::Write;
        match writeln!(std::io::stdout().lock(), "{}", out.trim_end()) {
            // A reader that stopped reading (`| head`) is not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            r => Ok(r?),
        }
    }
}

/// Left-aligned columns: a header row and rows of cells.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < width.len() {
                width[i] = width[i].max(cell.len());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = width[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
