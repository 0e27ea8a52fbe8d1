//! Golden packet vectors for bolt.p4, produced by the model it mirrors.
//!
//! Each scenario is a sequence of packets into tier 2 (UDP payload in hex, with its
//! source address) and, after each, the packets the model sent out, the queue effects
//! (occupancy, add_ptr and retrieve_ptr per level, the repair flag) and the model's
//! counters. p4/tests/test_vectors.py replays them on the Tofino model.
//!
//! The BEST stamp in the header prio of each ASSIGN, NOOP and REFILL comes from the
//! software switch's tier 2 (`switch::Tier2`, its level bitmap), run on the same packets
//! next to the model with a park table of size 0 (bolt.p4 parks nothing); its answers must
//! be the model's, and its HINTs (which bolt.p4 does not send) are left out. A scenario
//! that holds a packet between passes cannot be run by tier 2: its outputs carry
//! `"best": null` and prio 0, and the replay stops before them.
//!
//! The RETURN credit is applied as the software switch does (`switch::ReturnCredit`):
//! every REFILL sent grants its entries to the address it goes to, and a RETURN reaches
//! the model with only the entries its sender's credit covers; each other one goes back
//! to its client as a QUEUE_FULL of its own.
//!
//! The file is tests/vectors/p4/queue_vectors.json. This test fails when the committed
//! file differs from what the model produces now; `BOLT_REGENERATE_VECTORS=1 cargo test
//! -p scheduler-user --test p4_vectors` rewrites it.
//!
//! Regenerated vectors only pin what the model does now. tests/vectors/p4/queue_by_hand.json
//! is written by hand from docs/protocol.md, docs/queue.md and the thesis (QUEUE_FULL
//! lists, RETURN bounces, pointer REPAIR, SWAP restart, where a REFILL answer ends, a
//! spent budget); nothing here writes it, and `hand_written_vectors_hold` replays it.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use scheduler_common::{
    decode, encode_assign, encode_assign_list, encode_get_task, encode_noop, encode_queue_full, encode_refill,
    encode_refill_req, encode_return, encode_submit, Entry, JobRef, Message, RefillRequest, Requester, Task,
    MAX_MESSAGE_LEN,
};
use scheduler_user::queue::{Collect, Output, Packet, PassOutput, Pipeline, QueueConfig, Scheduler};
use scheduler_user::switch::{Answer, ReturnCredit, Tier2, WaitConfig};
use serde_json::{json, Value};

/// The scheduler's own address: inputs are sent to it, answers come from it.
const SWITCH: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 7171);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, 1), 40000);
const OTHER_CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, 2), 5555);
const EXECUTOR: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 40001);
const EXECUTOR_B: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 2), 40002);
const HOST: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 3, 1), 7172);

/// Every scenario runs with this geometry; the P4 build for the replay uses
/// -DQUEUE_INDEX_BITS=3 -DQUEUE_LEVEL_BITS=2.
const CAPACITY: u32 = 8;
const LEVELS: u8 = 4;

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/p4/queue_vectors.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn task(tid: u32, prio: u8, rsrc: u8) -> Task {
    let mut t = Task { prio, rsrc, class: (tid % 3) as u8, ..Task::default() };
    t.set_tid(tid);
    // A descriptor that differs per task, so a P4 word mix-up cannot go unnoticed.
    t.desc = core::array::from_fn(|i| (tid as u8).wrapping_mul(31).wrapping_add(i as u8));
    t
}

fn encoded(f: impl FnOnce(&mut [u8]) -> usize) -> Vec<u8> {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = f(&mut buf);
    buf[..n].to_vec()
}

fn submit(jid: u32, tasks: &[Task]) -> Vec<u8> {
    encoded(|b| encode_submit(b, JobRef::new(1, jid), 0, tasks).unwrap())
}

fn get_task(rtrv_prio: u8, exec_rsrc: u8, seq: u32) -> Vec<u8> {
    encoded(|b| encode_get_task(b, rtrv_prio, exec_rsrc, Requester::new(2, 1, seq), false).unwrap())
}

fn refill_req(node_rsrc: u8, want: u8) -> Vec<u8> {
    encoded(|b| encode_refill_req(b, node_rsrc, RefillRequest::new(3, want)).unwrap())
}

fn return_entries(entries: &[Entry]) -> Vec<u8> {
    encoded(|b| encode_return(b, entries).unwrap())
}

/// An output of the model as sent, with `best` in the header prio of ASSIGN, NOOP and
/// REFILL (`None`: not known, written as 0 and marked null).
fn output_json(o: &Output, best: Option<u8>) -> Value {
    let b = best.unwrap_or(0);
    let (to, op, payload) = match o {
        Output::Assign { to, entry } => (to, "ASSIGN", encoded(|buf| encode_assign(buf, entry, b).unwrap())),
        Output::Bundle { to, entries } => (to, "ASSIGN", encoded(|buf| encode_assign_list(buf, entries, b).unwrap())),
        Output::Noop { to, who } => (to, "NOOP", encoded(|buf| encode_noop(buf, *who, b).unwrap())),
        Output::QueueFull { to, job, tasks } => {
            (to, "QUEUE_FULL", encoded(|buf| encode_queue_full(buf, *job, tasks).unwrap()))
        }
        Output::Refill { to, entries } => (to, "REFILL", encoded(|buf| encode_refill(buf, entries, b).unwrap())),
    };
    let mut v = json!({ "to": to.to_string(), "from": SWITCH.to_string(), "op": op, "payload": hex(&payload) });
    if !matches!(o, Output::QueueFull { .. }) {
        v["best"] = json!(best);
    }
    v
}

/// The model's output an answer of tier 2 is, and the BEST it carries (None for a
/// QUEUE_FULL, which has none).
fn as_output(a: &Answer) -> (Output, Option<u8>) {
    match a {
        Answer::Assign { to, entry, best } => (Output::Assign { to: *to, entry: *entry }, Some(*best)),
        Answer::Bundle { to, entries, best } => (Output::Bundle { to: *to, entries: entries.to_vec() }, Some(*best)),
        Answer::Noop { to, who, best } => (Output::Noop { to: *to, who: *who }, Some(*best)),
        Answer::QueueFull { to, job, tasks } => (Output::QueueFull { to: *to, job: *job, tasks: tasks.to_vec() }, None),
        Answer::Refill { to, entries, best } => (Output::Refill { to: *to, entries: entries.to_vec() }, Some(*best)),
        Answer::Hint { .. } | Answer::Recall { .. } => unreachable!("HINTs and RECALLs are left out before"),
    }
}

/// The model as the switch runs it: recirculated and spawned packets are served from a
/// FIFO before the next packet from outside (Scheduler::run). Scenarios that need a
/// packet held between two of its passes drive this directly; every other scenario is
/// also run through `Scheduler` itself and must agree with it at every step.
struct Model {
    pipeline: Pipeline,
    scheduler: Option<Scheduler>,
    /// The software switch's tier 2 on the same packets: the source of BEST.
    tier2: Option<Tier2>,
    /// The switch's RETURN credit; None for the bare queue model (the hand-written
    /// vectors, which pin the queue alone).
    credit: Option<ReturnCredit>,
    held: Vec<(String, Packet)>,
}

struct Step {
    outputs: Vec<Output>,
    /// BEST of each output, where tier 2 ran (None for QUEUE_FULL, or without tier 2).
    best: Vec<Option<u8>>,
}

impl Step {
    fn unstamped(outputs: Vec<Output>) -> Step {
        let best = vec![None; outputs.len()];
        Step { outputs, best }
    }
}

impl Model {
    fn new(config: QueueConfig, checked_by_scheduler: bool) -> Model {
        // bolt.p4 parks nothing: a park table of size 0 answers at once, as version 1 did.
        // Nor does it register hosts: no HINT, and no host's share of a level.
        let wait = WaitConfig { max_parked: 0, hint_register: Duration::ZERO, ..WaitConfig::default() };
        Model {
            pipeline: Pipeline::new(config).unwrap(),
            scheduler: checked_by_scheduler.then(|| Scheduler::new(config).unwrap()),
            tier2: checked_by_scheduler.then(|| Tier2::new(Scheduler::new(config).unwrap(), wait)),
            credit: Some(ReturnCredit::default()),
            held: Vec::new(),
        }
    }

    fn run_fifo(&mut self, first: Packet, out: &mut Collect) {
        let mut fifo = VecDeque::new();
        let mut next = Some(first);
        while let Some(pkt) = next.take().or_else(|| fifo.pop_front()) {
            let PassOutput { recirculate, spawn } = self.pipeline.pass(pkt, out);
            fifo.extend(recirculate);
            fifo.extend(spawn);
        }
    }

    /// One packet from outside, processed with every pass it causes.
    fn message(&mut self, payload: &[u8], src: SocketAddrV4) -> Step {
        let msg = decode(payload).expect("vector inputs are valid messages");
        let mut over_credit = Vec::new();
        let msg = match (msg, self.credit.as_mut()) {
            (Message::Return(entries), Some(credit)) => {
                let (covered, _) = credit.cover_return(entries, src, &mut over_credit);
                assert!(!covered.is_empty(), "vector RETURNs are covered in part at least (a switch pass is made)");
                Message::Return(covered)
            }
            (other, _) => other,
        };
        let mut step = self.run_message(&msg, src);
        for a in &over_credit {
            let (o, best) = as_output(a);
            step.outputs.push(o);
            step.best.push(best);
        }
        self.grant(&step);
        step
    }

    /// Every REFILL sent credits its entries to the address it goes to.
    fn grant(&mut self, step: &Step) {
        let Some(credit) = self.credit.as_mut() else { return };
        for o in &step.outputs {
            if let Output::Refill { to, entries } = o {
                credit.grant(*to.ip(), entries.len() as u32);
            }
        }
    }

    fn run_message(&mut self, msg: &Message<'_>, src: SocketAddrV4) -> Step {
        let msg = *msg;
        let pkt = self.pipeline.admit(&msg, src).expect("vector inputs go to the switch");
        let mut out = Collect::default();
        self.run_fifo(pkt, &mut out);
        if let Some(s) = self.scheduler.as_mut() {
            let mut expect = Collect::default();
            s.handle(&msg, src, &mut expect).unwrap();
            assert_eq!(out.0, expect.0, "the FIFO driver and Scheduler disagree on outputs");
            assert_eq!(self.pipeline.stats(), s.stats(), "the FIFO driver and Scheduler disagree on counters");
            assert_eq!(self.pipeline.occupancy(), s.pipeline().occupancy());
        }
        let Some(t2) = self.tier2.as_mut() else { return Step::unstamped(out.0) };
        let mut answers = Vec::new();
        t2.handle(&msg, src, std::time::Instant::now(), &mut answers).unwrap();
        let (outputs, best): (Vec<Output>, Vec<Option<u8>>) =
            answers.iter().filter(|a| !matches!(a, Answer::Hint { .. } | Answer::Recall { .. })).map(as_output).unzip();
        assert_eq!(outputs, out.0, "tier 2 and the model disagree on outputs");
        Step { outputs, best }
    }

    /// Only the first pass of a packet; what it recirculates is held under `id`.
    fn first_pass(&mut self, id: &str, payload: &[u8], src: SocketAddrV4) -> Step {
        assert!(self.scheduler.is_none(), "held packets cannot be mirrored by Scheduler");
        let msg = decode(payload).unwrap();
        let pkt = self.pipeline.admit(&msg, src).unwrap();
        let mut out = Collect::default();
        let PassOutput { recirculate, spawn } = self.pipeline.pass(pkt, &mut out);
        assert!(spawn.is_none(), "a held first pass must not spawn");
        self.held.push((id.to_string(), recirculate.expect("the first pass must recirculate to be held")));
        Step::unstamped(out.0)
    }

    /// Releases a held packet and runs it to completion.
    fn resume(&mut self, id: &str) -> Step {
        let at = self.held.iter().position(|(h, _)| h == id).expect("no such held packet");
        let (_, pkt) = self.held.remove(at);
        let mut out = Collect::default();
        self.run_fifo(pkt, &mut out);
        Step::unstamped(out.0)
    }

    fn state(&self) -> Value {
        let occupancy = self.pipeline.occupancy();
        let levels: Vec<Value> = (0..occupancy.len())
            .map(|l| {
                let (add, retrieve) = self.pipeline.pointers(l);
                json!({ "prio": l + 1, "occupancy": occupancy[l], "add_ptr": add, "retrieve_ptr": retrieve })
            })
            .collect();
        json!({ "levels": levels, "repairing": self.pipeline.repairing() })
    }
}

struct Scenario {
    name: &'static str,
    about: &'static str,
    config: QueueConfig,
    model: Model,
    steps: Vec<Value>,
}

impl Scenario {
    fn new(name: &'static str, about: &'static str, priorities: u8, max_passes: u16, interleaved: bool) -> Scenario {
        let config = QueueConfig { capacity: CAPACITY, priorities, max_passes, initial_pointer: 0 };
        Scenario { name, about, config, model: Model::new(config, !interleaved), steps: Vec::new() }
    }

    fn record(&mut self, kind: &str, id: Option<&str>, input: Option<(&[u8], SocketAddrV4)>, step: Step) {
        let mut v = json!({
            "kind": kind,
            "outputs": step.outputs.iter().zip(&step.best).map(|(o, b)| output_json(o, *b)).collect::<Vec<_>>(),
            "queues": self.model.state(),
            "stats": serde_json::to_value(self.model.pipeline.stats()).unwrap(),
        });
        if let Some(id) = id {
            v["id"] = json!(id);
        }
        if let Some((payload, src)) = input {
            v["from"] = json!(src.to_string());
            v["to"] = json!(SWITCH.to_string());
            v["payload"] = json!(hex(payload));
        }
        self.steps.push(v);
    }

    fn send(&mut self, payload: Vec<u8>, src: SocketAddrV4) -> &mut Self {
        let step = self.model.message(&payload, src);
        self.record("message", None, Some((&payload, src)), step);
        self
    }

    fn hold(&mut self, id: &'static str, payload: Vec<u8>, src: SocketAddrV4) -> &mut Self {
        let step = self.model.first_pass(id, &payload, src);
        self.record("first_pass", Some(id), Some((&payload, src)), step);
        self
    }

    fn resume(&mut self, id: &'static str) -> &mut Self {
        let step = self.model.resume(id);
        self.record("resume", Some(id), None, step);
        self
    }

    fn json(&self) -> Value {
        json!({
            "name": self.name,
            "about": self.about,
            "config": {
                "capacity": self.config.capacity,
                "priorities": self.config.priorities,
                "max_passes": self.config.max_passes,
                "initial_pointer": self.config.initial_pointer,
            },
            "steps": self.steps,
        })
    }
}

fn scenarios() -> Vec<Scenario> {
    let mut all = Vec::new();

    let mut s = Scenario::new("submit", "one task queued, then handed to an executor", LEVELS, 1024, false);
    s.send(submit(1, &[task(1, 1, 0)]), CLIENT).send(get_task(1, 0, 1), EXECUTOR).send(get_task(1, 0, 2), EXECUTOR);
    all.push(s);

    let mut s = Scenario::new(
        "multi_task_submit",
        "one SUBMIT of tasks at three priorities, one pass per task",
        LEVELS,
        1024,
        false,
    );
    s.send(submit(2, &[task(10, 2, 0), task(11, 1, 0), task(12, 4, 0), task(13, 1, 0)]), CLIENT);
    for seq in 0..5 {
        s.send(get_task(1, 0, seq), EXECUTOR);
    }
    all.push(s);

    let mut s = Scenario::new(
        "queue_full_and_repair",
        "ten tasks into a queue of eight: QUEUE_FULL lists the two not added, a REPAIR resets add_ptr",
        1,
        1024,
        false,
    );
    let tasks: Vec<Task> = (0..10).map(|i| task(100 + i, 1, 0)).collect();
    s.send(submit(3, &tasks), CLIENT).send(get_task(1, 0, 1), EXECUTOR).send(submit(4, &[task(200, 1, 0)]), CLIENT);
    all.push(s);

    let mut s = Scenario::new(
        "empty_retrieval_and_retrieve_repair",
        "NOOPs advance retrieve_ptr past add_ptr; the next SUBMIT pulls it back with a REPAIR",
        1,
        1024,
        false,
    );
    s.send(get_task(1, 0, 1), EXECUTOR).send(get_task(1, 0, 2), EXECUTOR).send(get_task(1, 0, 3), EXECUTOR);
    s.send(submit(5, &[task(300, 1, 0), task(301, 1, 0)]), CLIENT);
    s.send(get_task(1, 0, 4), EXECUTOR).send(get_task(1, 0, 5), EXECUTOR);
    all.push(s);

    let mut s = Scenario::new(
        "priority_search",
        "GET_TASK recirculates with RTRV_PRIO + 1 past empty levels; NOOP after the lowest",
        LEVELS,
        1024,
        false,
    );
    s.send(submit(6, &[task(400, 3, 0), task(401, 4, 0)]), CLIENT);
    s.send(get_task(1, 0, 1), EXECUTOR).send(get_task(4, 0, 2), EXECUTOR).send(get_task(1, 0, 3), EXECUTOR);
    s.send(get_task(8, 0, 4), EXECUTOR);
    all.push(s);

    let mut s = Scenario::new(
        "swap",
        "the head needs a resource the executor lacks: SWAP with the next tasks until one runs",
        1,
        1024,
        false,
    );
    s.send(submit(7, &[task(500, 1, 0b10), task(501, 1, 0b10), task(502, 1, 0b01), task(503, 1, 0)]), CLIENT);
    s.send(get_task(1, 0b01, 1), EXECUTOR);
    for seq in 2..6 {
        s.send(get_task(1, 0b11, seq), EXECUTOR);
    }
    all.push(s);

    let mut s = Scenario::new(
        "swap_reinsert",
        "no task at level 1 runs here: the held task is reinserted and the search goes on at level 2",
        2,
        1024,
        false,
    );
    s.send(submit(8, &[task(600, 1, 0b100), task(601, 1, 0b100), task(602, 2, 0)]), CLIENT);
    s.send(get_task(1, 0b011, 1), EXECUTOR).send(get_task(1, 0b011, 2), EXECUTOR);
    s.send(get_task(1, 0b100, 3), EXECUTOR).send(get_task(1, 0b100, 4), EXECUTOR);
    all.push(s);

    let mut s = Scenario::new(
        "swap_restart",
        "a SWAP search sees retrieve_ptr moved by another GET_TASK and restarts from the head",
        1,
        1024,
        true,
    );
    s.send(submit(9, &[task(700, 1, 0b10), task(701, 1, 0), task(702, 1, 0b10)]), CLIENT);
    s.hold("A", get_task(1, 0b01, 1), EXECUTOR);
    s.send(get_task(1, 0xff, 2), EXECUTOR_B);
    s.resume("A");
    s.send(get_task(1, 0xff, 3), EXECUTOR_B).send(get_task(1, 0xff, 4), EXECUTOR_B);
    all.push(s);

    let mut s = Scenario::new(
        "swap_budget",
        "the pass budget ends a search that would need more SWAP steps; nothing is lost",
        1,
        4,
        false,
    );
    s.send(submit(10, &[task(800, 1, 1), task(801, 1, 1), task(802, 1, 1), task(803, 1, 1), task(804, 1, 1)]), CLIENT);
    s.send(submit(11, &[task(805, 1, 0)]), CLIENT);
    s.send(get_task(1, 0, 1), EXECUTOR).send(get_task(1, 0xff, 2), EXECUTOR);
    all.push(s);

    let mut s = Scenario::new(
        "swap_budget_next_level",
        "level 1's budget runs out: its held task goes to the tail and the search finds the level-2 task",
        2,
        2,
        false,
    );
    s.send(submit(15, &[task(850, 1, 1), task(851, 1, 1), task(852, 1, 1), task(853, 1, 1), task(854, 2, 0)]), CLIENT);
    s.send(get_task(1, 0, 1), EXECUTOR);
    for seq in 2..7 {
        s.send(get_task(1, 0xff, seq), EXECUTOR);
    }
    all.push(s);

    let mut s = Scenario::new(
        "refill",
        "a host asks for 18 tasks: a full batch of 16 and one of 2, highest priority first, matching only",
        LEVELS,
        1024,
        false,
    );
    let tasks: Vec<Task> =
        (0..24).map(|i| task(900 + i, (i % 4 + 1) as u8, if i % 7 == 3 { 0b1000 } else { 0 })).collect();
    s.send(submit(12, &tasks[..12]), CLIENT).send(submit(13, &tasks[12..]), CLIENT);
    s.send(refill_req(0b0111, 18), HOST).send(refill_req(0b0111, 8), HOST).send(refill_req(0b0111, 8), HOST);
    all.push(s);

    let other =
        |tid: u32, prio: u8| Entry::new(40, 41, task(tid, prio, 0), OTHER_CLIENT.ip().octets(), OTHER_CLIENT.port());
    let mut s = Scenario::new(
        "return",
        "a host gives entries back: as many as it was REFILLed queue like SUBMIT and keep their client, \
         bouncing to it when the queue is full; the one beyond its credit bounces to its client too",
        1,
        1024,
        false,
    );
    let ten: Vec<Task> = (0..10).map(|i| task(1000 + i, 1, 0)).collect();
    s.send(submit(14, &ten[..7]), CLIENT).send(refill_req(0, 3), HOST).send(submit(15, &ten[7..]), CLIENT);
    s.send(return_entries(&[other(1100, 1), other(1101, 1), other(1102, 1), other(1103, 1)]), HOST);
    for seq in 0..9 {
        s.send(get_task(1, 0, seq), EXECUTOR);
    }
    all.push(s);

    all
}

fn generate() -> String {
    let scenarios: Vec<Value> = scenarios().iter().map(Scenario::json).collect();
    let doc = json!({
        "about": "Golden vectors for p4/bolt.p4, produced by the Bolt model (scheduler-user/src/queue). \
                  Payloads are UDP payloads in hex. After each step: the packets the model sent, \
                  per-level occupancy and pointers, and the model's QueueStats.",
        "generator": "scheduler-user/tests/p4_vectors.rs (BOLT_REGENERATE_VECTORS=1 to rewrite)",
        "switch": SWITCH.to_string(),
        "p4_build": { "QUEUE_INDEX_BITS": CAPACITY.trailing_zeros(), "QUEUE_LEVEL_BITS": LEVELS.trailing_zeros() },
        "scenarios": scenarios,
    });
    serde_json::to_string_pretty(&doc).unwrap() + "\n"
}

#[test]
fn committed_vectors_match_the_model() {
    let now = generate();
    let path = vectors_path();
    if std::env::var("BOLT_REGENERATE_VECTORS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; generate it with BOLT_REGENERATE_VECTORS=1", path.display()));
    if committed != now {
        let line = committed.lines().zip(now.lines()).position(|(a, b)| a != b).map_or(0, |l| l + 1);
        panic!(
            "{} differs from the model (first at line {line}); if the change is intended, \
             regenerate with BOLT_REGENERATE_VECTORS=1",
            path.display()
        );
    }
}

#[test]
fn vectors_cover_every_operation_the_p4_program_handles() {
    let all = scenarios();
    let stats: Vec<_> = all.iter().map(|s| s.model.pipeline.stats().clone()).collect();
    let sum = |f: fn(&scheduler_user::queue::QueueStats) -> u64| stats.iter().map(f).sum::<u64>();
    assert!(sum(|s| s.assigns) > 0, "no ASSIGN");
    assert!(sum(|s| s.noops) > 0, "no NOOP");
    assert!(sum(|s| s.queue_full_packets) > 0, "no QUEUE_FULL");
    assert!(sum(|s| s.repairs_add) > 0, "no add_ptr REPAIR");
    assert!(sum(|s| s.repairs_retrieve) > 0, "no retrieve_ptr REPAIR");
    assert!(sum(|s| s.swaps) > 0, "no SWAP");
    assert!(sum(|s| s.reinserts) > 0, "no reinsertion");
    assert!(sum(|s| s.budget_exhausted) > 0, "no spent pass budget");
    assert!(sum(|s| s.refill_packets) > 1, "no REFILL batches");
    assert!(sum(|s| s.returned_tasks) > 0, "no RETURN");
    // A full REFILL batch that is not the last one (the P4 fork), and a bounced RETURN
    // entry with more after it (the other fork).
    let refill = all.iter().find(|s| s.name == "refill").unwrap();
    let batches: Vec<usize> = refill
        .steps
        .iter()
        .flat_map(|st| st["outputs"].as_array().unwrap().iter())
        .filter(|o| o["op"] == "REFILL")
        .map(|o| (o["payload"].as_str().unwrap().len() / 2 - 8) / 40)
        .collect();
    assert_eq!(batches[..2], [16, 2]);
    // Of four returned entries, the credit covers three (a REFILL of three): one queued,
    // two bounced by the full queue, one by the credit.
    let ret = all.iter().find(|s| s.name == "return").unwrap();
    let bounced = ret.steps[3]["outputs"].as_array().unwrap();
    assert_eq!(bounced.len(), 3, "three RETURN entries bounce to their client");
    assert!(bounced.iter().all(|o| o["to"] == OTHER_CLIENT.to_string() && o["op"] == "QUEUE_FULL"));
    assert_eq!(ret.steps[3]["stats"]["returned_tasks"], 3, "the covered three reach the queue, the fourth not");
    // The restart really restarted: the held search ended in a NOOP after task 701 left.
    let restart = all.iter().find(|s| s.name == "swap_restart").unwrap();
    assert_eq!(restart.steps[3]["outputs"][0]["op"], "NOOP");
}

fn hand_vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/p4/queue_by_hand.json")
}

/// A payload of the hand-written file: hex with fields separated by spaces and `|`, and
/// `vv` for the version byte.
fn hand_hex(s: &str) -> String {
    s.replace("vv", &format!("{:02x}", scheduler_common::VERSION)).chars().filter(|c| c.is_ascii_hexdigit()).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd number of hex digits: {s}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// The vectors of tests/vectors/p4/queue_by_hand.json, written from docs/protocol.md,
/// docs/queue.md and the thesis: the model must produce exactly these bytes and states.
/// Nothing writes that file, so an implementation that is wrong cannot pass by
/// regenerating it.
#[test]
fn hand_written_vectors_hold() {
    let path = hand_vectors_path();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut covered = Vec::new();
    for sc in doc["scenarios"].as_array().unwrap() {
        let name = sc["name"].as_str().unwrap();
        let c = &sc["config"];
        let config = QueueConfig {
            capacity: c["capacity"].as_u64().unwrap() as u32,
            priorities: c["priorities"].as_u64().unwrap() as u8,
            max_passes: c["max_passes"].as_u64().unwrap() as u16,
            initial_pointer: 0,
        };
        let steps = sc["steps"].as_array().unwrap();
        let interleaved = steps.iter().any(|st| st["kind"] != "message");
        let mut model = Model::new(config, !interleaved);
        model.credit = None;
        for (n, st) in steps.iter().enumerate() {
            let at = format!("{name} step {n}");
            let input = st["payload"].as_str().map(|p| unhex(&hand_hex(p)));
            let src = || st["from"].as_str().unwrap().parse::<SocketAddrV4>().unwrap();
            let step = match st["kind"].as_str().unwrap() {
                "message" => model.message(&input.unwrap(), src()),
                "first_pass" => model.first_pass(st["id"].as_str().unwrap(), &input.unwrap(), src()),
                "resume" => model.resume(st["id"].as_str().unwrap()),
                other => panic!("{at}: unknown kind {other}"),
            };
            let got: Vec<(String, String)> = step
                .outputs
                .iter()
                .map(|o| output_json(o, None))
                .map(|o| (o["to"].as_str().unwrap().to_string(), o["payload"].as_str().unwrap().to_string()))
                .collect();
            let expect: Vec<(String, String)> = st["expect"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| (o["to"].as_str().unwrap().to_string(), hand_hex(o["payload"].as_str().unwrap())))
                .collect();
            assert_eq!(got, expect, "{at}: packets sent");
            if let Some(occupancy) = st.get("occupancy") {
                let occupancy: Vec<u32> = serde_json::from_value(occupancy.clone()).unwrap();
                assert_eq!(model.pipeline.occupancy(), occupancy, "{at}: occupancy");
            }
            if let Some(pointers) = st.get("pointers") {
                let pointers: Vec<(u32, u32)> = serde_json::from_value(pointers.clone()).unwrap();
                let now: Vec<(u32, u32)> = (0..pointers.len()).map(|l| model.pipeline.pointers(l)).collect();
                assert_eq!(now, pointers, "{at}: [add_ptr, retrieve_ptr] per level");
            }
            if let Some(repairing) = st.get("repairing") {
                assert_eq!(model.pipeline.repairing(), repairing.as_bool().unwrap(), "{at}: repairing");
            }
        }
        covered.push(name.to_string());
    }
    for needed in ["queue_full", "swap_restart", "repair", "refill_termination", "budget"] {
        assert!(covered.iter().any(|n| n.contains(needed)), "no hand-written scenario for {needed}");
    }
}
