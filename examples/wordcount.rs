//! Parallel word count over files with the Rust API: one task per file counts its
//! words (the `count_words` handler), the client adds the counts up.
//!
//!     cargo run -p bolt --example wordcount -- docs/*.md
//!
//! It starts a software switch, an object store and four executors in this process
//! (loopback); a deployment registers the same handler in its executor binary and
//! points the client at its switch.

use std::collections::HashMap;

use bolt::{Bytes, Client, Executor};
use scheduler_user::store::{self, StoreConfig};
use scheduler_user::switch::{self, SwitchConfig};

/// The handler: a file's text in, `word count` lines out.
pub fn count_words(text: &[u8]) -> Result<Bytes, String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut counts: HashMap<String, u64> = HashMap::new();
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()) {
        *counts.entry(word.to_lowercase()).or_default() += 1;
    }
    Ok(counts.iter().map(|(w, n)| format!("{w} {n}\n")).collect::<String>().into())
}

/// Counts the words of `files` on loopback executors; returns word -> count.
pub async fn count_files(files: &[String]) -> anyhow::Result<HashMap<String, u64>> {
    let switch = switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse()?, ..SwitchConfig::default() })?;
    let store = store::spawn(StoreConfig::new("127.0.0.1:0".parse()?))?;
    let executors = Executor::builder(switch.local_addr())
        .executors(4)
        .handler("count_words", |ctx| count_words(&ctx.input))
        .spawn(store.addr())?;
    let client = Client::builder(switch.local_addr()).store(store.addr()).connect().await?;
    let texts = files.iter().map(std::fs::read).collect::<Result<Vec<_>, _>>()?;
    let mut total: HashMap<String, u64> = HashMap::new();
    for lines in client.map_ordered("count_words", texts).await? {
        for line in std::str::from_utf8(&lines)?.lines() {
            let (word, n) = line.rsplit_once(' ').ok_or_else(|| anyhow::anyhow!("bad line {line:?}"))?;
            *total.entry(word.to_string()).or_default() += n.parse::<u64>()?;
        }
    }
    executors.shutdown();
    Ok(total)
}

#[allow(dead_code)] // the smoke test (bolt/tests/examples.rs) calls count_files only
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(!files.is_empty(), "usage: wordcount FILE...");
    let total = count_files(&files).await?;
    let mut top: Vec<_> = total.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    println!("{} words, {} distinct, in {} files", total.values().sum::<u64>(), total.len(), files.len());
    for (word, n) in top.into_iter().take(10) {
        println!("{n:8} {word}");
    }
    Ok(())
}
