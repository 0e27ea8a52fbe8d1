//! Running the loaded program on a frame in the kernel (BPF_PROG_TEST_RUN), without any
//! interface: for tests, benchmarks and `bolt` self-checks.

use std::time::Duration;

use aya::{programs::Xdp, TestRun as _, TestRunOptions};

use super::loader::BoltXdp;

/// XDP verdicts (enum xdp_action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Aborted,
    Drop,
    Pass,
    Tx,
    Redirect,
    Other(u32),
}

impl Verdict {
    pub fn from_u32(v: u32) -> Verdict {
        match v {
            0 => Verdict::Aborted,
            1 => Verdict::Drop,
            2 => Verdict::Pass,
            3 => Verdict::Tx,
            4 => Verdict::Redirect,
            v => Verdict::Other(v),
        }
    }
}

/// What one BPF_PROG_TEST_RUN returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameRun {
    pub verdict: Verdict,
    /// The frame as the program left it.
    pub frame: Vec<u8>,
    /// The kernel's mean time per run.
    pub per_run: Duration,
}

/// Room for the largest frame the program produces from any input (it grows a GET_TASK
/// to an ASSIGN; everything else stays or shrinks).
const OUT_ROOM: usize = 2048;

impl BoltXdp {
    /// Runs the program `repeat` times on `frame`; see [`run_frame`].
    pub fn run_frame(&self, frame: &[u8], repeat: u32) -> anyhow::Result<FrameRun> {
        run_frame(self.program()?, frame, repeat)
    }
}

/// Runs `program` `repeat` times on `frame`. The kernel does not restore the frame between
/// repetitions: a run that rewrites the frame hands its output to the next.
pub fn run_frame(program: &Xdp, frame: &[u8], repeat: u32) -> anyhow::Result<FrameRun> {
    {
        let mut out = vec![0u8; OUT_ROOM.max(frame.len() + 64)];
        let result = program.test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut out),
            repeat: repeat.max(1),
            ..TestRunOptions::new()
        })?;
        out.truncate(result.data_size_out as usize);
        Ok(FrameRun { verdict: Verdict::from_u32(result.return_value), frame: out, per_run: result.duration })
    }
}
