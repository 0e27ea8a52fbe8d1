//! The Rust example runs: examples/wordcount.rs counts the words of files on loopback.

#[path = "../../examples/wordcount.rs"]
mod wordcount;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wordcount_example_counts_words_across_files() {
    let dir = std::env::temp_dir().join(format!("bolt-wordcount-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a.txt");
    let b = dir.join("b.txt");
    std::fs::write(&a, "the quick fox\nThe lazy dog").unwrap();
    std::fs::write(&b, "the end, the fox").unwrap();
    let files = [a.display().to_string(), b.display().to_string()];
    let total = tokio::time::timeout(std::time::Duration::from_secs(30), wordcount::count_files(&files))
        .await
        .expect("finished in time")
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(total["the"], 4);
    assert_eq!(total["fox"], 2);
    assert_eq!(total["end"], 1);
    assert_eq!(total.values().sum::<u64>(), 10);
}
