//! Jobs for the simulator from the project's workload generators: SW1
//! (`bench::sw1`) and the Google-like trace (`bench::workload::Trace`).

use serde::Serialize;

use super::clock::Nanos;
use crate::bench::sw1;
use crate::bench::workload::{Trace, TraceParams};

/// What the clients submit.
#[derive(Clone, Debug, Serialize)]
pub enum WorkloadSpec {
    /// SW1 at a utilisation of the cluster: two clients, a job every 10 ms each, 10-ms tasks.
    /// `client_offset_ns`: the second client's jobs are due this long after the first's
    /// (`bolt bench all --client-offset-ms`; 0: at the same instants).
    Sw1 { utilization: f64, seconds: f64, client_offset_ns: Nanos },
    /// The Google-like trace; its jobs are spread over `clients` clients in turn.
    Trace { params: TraceParams, clients: u32 },
    /// Jobs given one by one, for scenarios whose outcome is worked out by hand; tasks
    /// submitted within `seconds` are measured.
    Scripted { jobs: Vec<ScriptedJob>, seconds: f64 },
}

/// One job of a [`WorkloadSpec::Scripted`] workload.
#[derive(Clone, Debug, Serialize)]
pub struct ScriptedJob {
    pub at: Nanos,
    pub client: u32,
    pub prio: u8,
    /// Each task's duration, µs.
    pub durations_us: Vec<u32>,
}

impl WorkloadSpec {
    pub fn seconds(&self) -> f64 {
        match self {
            WorkloadSpec::Sw1 { seconds, .. } => *seconds,
            WorkloadSpec::Trace { params, .. } => params.seconds,
            WorkloadSpec::Scripted { seconds, .. } => *seconds,
        }
    }

    pub fn clients(&self) -> u32 {
        match self {
            WorkloadSpec::Sw1 { .. } => sw1::CLIENTS,
            WorkloadSpec::Trace { clients, .. } => (*clients).max(1),
            WorkloadSpec::Scripted { jobs, .. } => jobs.iter().map(|j| j.client + 1).max().unwrap_or(1),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimJob {
    /// When the client sends it.
    pub at: Nanos,
    pub client: u32,
    pub prio: u8,
    /// Its tasks are `first..first + tasks` in [`Jobs::duration_us`].
    pub first: u32,
    pub tasks: u32,
}

/// Every job of a run, in submission order, and every task's duration.
pub struct Jobs {
    pub jobs: Vec<SimJob>,
    pub duration_us: Vec<u32>,
}

impl Jobs {
    pub fn generate(spec: &WorkloadSpec, executors: u32) -> anyhow::Result<Jobs> {
        let mut jobs = Vec::new();
        let mut duration_us = Vec::new();
        match spec {
            WorkloadSpec::Sw1 { utilization, seconds, client_offset_ns } => {
                let per_job = sw1::tasks_per_job(*utilization, executors);
                let per_client = (seconds * 1000.0 / sw1::INTERVAL_MS as f64) as u64;
                for k in 0..per_client {
                    for client in 0..sw1::CLIENTS {
                        let first = duration_us.len() as u32;
                        duration_us.extend(std::iter::repeat_n(sw1::TASK_MS * 1000, per_job as usize));
                        let at = k * sw1::INTERVAL_MS * 1_000_000 + if client > 0 { *client_offset_ns } else { 0 };
                        jobs.push(SimJob { at, client, prio: 1, first, tasks: per_job });
                    }
                }
            }
            WorkloadSpec::Trace { params, clients } => {
                let trace = Trace::generate(params)?;
                for (i, (at, prio, durations)) in trace.jobs.iter().enumerate() {
                    let first = duration_us.len() as u32;
                    duration_us.extend_from_slice(durations);
                    jobs.push(SimJob {
                        at: at.as_nanos() as Nanos,
                        client: i as u32 % (*clients).max(1),
                        prio: *prio,
                        first,
                        tasks: durations.len() as u32,
                    });
                }
            }
            WorkloadSpec::Scripted { jobs: scripted, .. } => {
                anyhow::ensure!(scripted.windows(2).all(|w| w[0].at <= w[1].at), "scripted jobs in submission order");
                for j in scripted {
                    let first = duration_us.len() as u32;
                    duration_us.extend_from_slice(&j.durations_us);
                    let tasks = j.durations_us.len() as u32;
                    jobs.push(SimJob { at: j.at, client: j.client, prio: j.prio, first, tasks });
                }
            }
        }
        anyhow::ensure!(duration_us.len() < u32::MAX as usize, "too many tasks for one run");
        Ok(Jobs { jobs, duration_us })
    }

    /// The job task `tid` belongs to.
    pub fn job_of(&self, tid: u32) -> &SimJob {
        &self.jobs[self.job_index(tid)]
    }

    /// The index of the job task `tid` belongs to.
    pub fn job_index(&self, tid: u32) -> usize {
        self.jobs.partition_point(|j| j.first + j.tasks <= tid)
    }
}
