//! The same DAG jobs on Dask distributed (data-aware placement, work stealing), in the
//! peers' Python venv (`bolt bench peers` creates it; Dask is pip-installed on first
//! use). Dask runs on loopback: its workers are processes of this host, so its remote
//! fetches cross no capped link.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;

use super::Job;
use crate::bench::peers::env::{self, RunDir, Venv};

const DRIVER: &str = include_str!("dask_dag_driver.py");

/// One job of the run, as the driver reports it.
#[derive(Debug, Deserialize, serde::Serialize)]
pub struct DaskResult {
    pub experiment: String,
    pub variant: String,
    pub tasks: usize,
    pub makespan_s: f64,
    pub busy_s: f64,
}

/// The job as the driver reads it: files by size, tasks by their inputs (a file or an
/// earlier task's output), the bytes they read and the bytes they write.
fn job_json(experiment: &str, variant: &str, (tasks, objects): &Job, mix_output: u64) -> serde_json::Value {
    let file = |name: &str| objects.iter().position(|(o, _)| o.name == name);
    let out_len = |handler: &str| match handler {
        "stack" => 88,
        "compare" => 24,
        _ => mix_output,
    };
    let tasks: Vec<serde_json::Value> = tasks
        .iter()
        .map(|t| {
            let mut inputs: Vec<(&str, usize)> =
                t.inputs.iter().filter_map(|o| file(&o.name)).map(|i| ("file", i)).collect();
            inputs.extend(t.parents.iter().map(|&p| ("task", p)));
            let input_bytes: u64 = t.inputs.iter().map(|o| o.size).sum::<u64>()
                + t.parents.iter().map(|&p| out_len(&tasks[p].handler)).sum::<u64>();
            serde_json::json!({ "inputs": inputs, "input_bytes": input_bytes, "out_len": out_len(&t.handler) })
        })
        .collect();
    let files: Vec<u64> = objects.iter().map(|(o, _)| o.size).collect();
    // Bolt's handlers make the same passes over every task's inputs, calibrated on a
    // root's inputs: a task's CPU grows with what it reads (a fan-in sink reads ten).
    let calibration_bytes = tasks
        .iter()
        .find(|t| t["inputs"].as_array().is_some_and(|i| i.iter().all(|x| x[0] == "file")))
        .and_then(|t| t["input_bytes"].as_u64())
        .unwrap_or(1);
    serde_json::json!({
        "experiment": experiment, "variant": variant, "files": files, "tasks": tasks,
        "calibration_bytes": calibration_bytes,
    })
}

/// Runs `jobs` (experiment, variant, job) on a Dask LocalCluster of `workers`
/// single-threaded processes, each task calibrated to `task_ms` of CPU.
pub fn run(
    venv_dir: &Path,
    jobs: &[(&'static str, String, Job)],
    workers: u32,
    task_ms: u64,
    mix_output: u64,
) -> anyhow::Result<Vec<DaskResult>> {
    let venv = Venv::create(venv_dir, &env::default_python())?;
    venv.install(&env::CORE).context("installing Dask into the peers' venv")?;
    let dir = RunDir::create()?;
    let spec = serde_json::json!({
        "workers": workers,
        "task_ms": task_ms,
        "timeout_s": 300,
        "tmp": dir.path,
        "jobs": jobs.iter().map(|(e, v, j)| job_json(e, v, j, mix_output)).collect::<Vec<_>>(),
    });
    let spec_path = dir.write("jobs.json", &spec.to_string())?;
    let script = dir.write("dask_dag_driver.py", DRIVER)?;
    let results = dir.path.join("results.json");
    let mut cmd = Command::new(venv.python());
    cmd.arg(&script).arg(&spec_path).arg(&results).current_dir(&dir.path);
    let out = env::run_bounded(&mut cmd, Duration::from_secs(600))?;
    anyhow::ensure!(out.success, "the Dask driver failed: {}", out.tail);
    let text = std::fs::read_to_string(&results).context("the Dask driver's results")?;
    Ok(serde_json::from_str(&text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::dag::{generate, Shape};
    use crate::client::dag_run::{mix_dag, NodeStore};

    #[test]
    fn a_job_names_its_files_and_parents_and_calibrates_on_a_roots_inputs() {
        let hosts = [NodeStore { node: 1, store: "10.0.1.2:7180".parse().unwrap() }];
        // Fan-in of 4, degree 3: task 0 waits for tasks 1, 2, 3, which read a file each.
        let job = mix_dag(generate(Shape::FanIn, 4, 3, 0), &hosts, 7, 1000, 1, 500);
        let v = job_json("dag", "fan-in", &job, 500);
        assert_eq!(v["files"], serde_json::json!([1000, 1000, 1000]));
        assert_eq!(v["calibration_bytes"], 1000);
        let tasks = v["tasks"].as_array().unwrap();
        assert_eq!(tasks[0]["inputs"], serde_json::json!([["task", 1], ["task", 2], ["task", 3]]));
        assert_eq!(tasks[0]["input_bytes"], 1500, "three parents' 500-byte outputs");
        assert_eq!(tasks[2]["inputs"], serde_json::json!([["file", 1]]));
        assert!(tasks.iter().all(|t| t["out_len"] == 500));
    }
}
