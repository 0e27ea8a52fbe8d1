//! DAG jobs (MATRIX's WaitQ): each task waits until all its parents are done
//! (`num_wait_parent` reaches 0), then is released with its parents' outputs as its
//! inputs, in parent order, after its own external inputs. A failed task fails every
//! descendant, each with the reason naming the failed ancestor. No I/O here: the runner
//! (`dag_run`) feeds completions in and submits what comes out.

use serde::Serialize;

use crate::store::ObjectLocation;

/// One task of a DAG.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DagTask {
    /// Data handler it runs (see `executor::run_data`).
    pub handler: String,
    pub args: Vec<u8>,
    /// Indices of the tasks whose outputs it reads (each lower or higher, no cycle).
    pub parents: Vec<usize>,
    /// Objects it reads besides its parents' outputs.
    pub inputs: Vec<ObjectLocation>,
}

/// A task's state in the WaitQ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum NodeState {
    /// Parents not all done.
    Waiting,
    /// Handed to the runner to submit.
    Released,
    Done {
        output: Option<ObjectLocation>,
    },
    /// The task failed (reason from its RESULT or the client), or an ancestor did.
    Failed {
        reason: String,
    },
}

/// The WaitQ of one DAG job.
#[derive(Debug)]
pub struct DagState {
    tasks: Vec<DagTask>,
    children: Vec<Vec<usize>>,
    num_wait_parent: Vec<usize>,
    states: Vec<NodeState>,
    final_count: usize,
}

impl DagState {
    /// Checks the DAG (parents in range, no self-loop, no cycle).
    pub fn new(tasks: Vec<DagTask>) -> anyhow::Result<DagState> {
        let n = tasks.len();
        let mut children = vec![Vec::new(); n];
        for (i, t) in tasks.iter().enumerate() {
            for &p in &t.parents {
                anyhow::ensure!(p < n && p != i, "task {i} names parent {p}, not another task of the DAG");
                children[p].push(i);
            }
        }
        let num_wait_parent: Vec<usize> = tasks.iter().map(|t| t.parents.len()).collect();
        // Kahn's algorithm: every task must be reachable from the roots.
        let mut wait = num_wait_parent.clone();
        let mut ready: Vec<usize> = (0..n).filter(|&i| wait[i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = ready.pop() {
            seen += 1;
            for &c in &children[i] {
                wait[c] -= 1;
                if wait[c] == 0 {
                    ready.push(c);
                }
            }
        }
        anyhow::ensure!(seen == n, "the DAG has a cycle");
        Ok(DagState { states: vec![NodeState::Waiting; n], tasks, children, num_wait_parent, final_count: 0 })
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn task(&self, i: usize) -> &DagTask {
        &self.tasks[i]
    }

    pub fn state(&self, i: usize) -> &NodeState {
        &self.states[i]
    }

    pub fn states(&self) -> &[NodeState] {
        &self.states
    }

    /// Every task done or failed.
    pub fn is_final(&self) -> bool {
        self.final_count == self.tasks.len()
    }

    /// Releases the roots (tasks without parents); call once at the start.
    pub fn start(&mut self) -> Vec<usize> {
        let roots: Vec<usize> = (0..self.len()).filter(|&i| self.num_wait_parent[i] == 0).collect();
        for &i in &roots {
            self.states[i] = NodeState::Released;
        }
        roots
    }

    /// The inputs of a released task: its own, then its parents' outputs in order.
    pub fn inputs_of(&self, i: usize) -> Vec<ObjectLocation> {
        let mut v = self.tasks[i].inputs.clone();
        for &p in &self.tasks[i].parents {
            if let NodeState::Done { output: Some(o) } = &self.states[p] {
                v.push(o.clone());
            }
        }
        v
    }

    /// Task `i` is done with `output`: returns the children this releases (each child
    /// exactly once, when its last parent is done). A report for a task not Released is
    /// ignored (a duplicate, or one for a task failed already).
    pub fn on_done(&mut self, i: usize, output: Option<ObjectLocation>) -> Vec<usize> {
        if self.states[i] != NodeState::Released {
            return Vec::new();
        }
        self.states[i] = NodeState::Done { output };
        self.final_count += 1;
        let mut released = Vec::new();
        for k in 0..self.children[i].len() {
            let c = self.children[i][k];
            self.num_wait_parent[c] -= 1;
            if self.num_wait_parent[c] == 0 && self.states[c] == NodeState::Waiting {
                self.states[c] = NodeState::Released;
                released.push(c);
            }
        }
        released
    }

    /// Task `i` failed: it and every descendant not final yet become Failed. Returns the
    /// descendants failed with it.
    pub fn on_failed(&mut self, i: usize, reason: &str) -> Vec<usize> {
        if self.states[i] != NodeState::Released {
            return Vec::new();
        }
        self.states[i] = NodeState::Failed { reason: reason.to_owned() };
        self.final_count += 1;
        let mut failed = Vec::new();
        let mut stack = self.children[i].clone();
        while let Some(c) = stack.pop() {
            if matches!(self.states[c], NodeState::Waiting) {
                self.states[c] = NodeState::Failed { reason: format!("ancestor task {i} failed: {reason}") };
                self.final_count += 1;
                failed.push(c);
                stack.extend(self.children[c].iter().copied());
            }
        }
        failed.sort_unstable();
        failed
    }
}

/// The DAG shapes MATRIX evaluates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Independent tasks.
    Bag,
    /// A tree whose leaves run first: each inner task waits for `degree` children.
    FanIn,
    /// A tree whose root runs first: each task releases `degree` children.
    FanOut,
    /// Chains of `length` tasks, each reading its predecessor's output.
    Pipeline,
}

/// The parents of each of `tasks` tasks in `shape` (`degree` ≥ 1 for the trees,
/// `length` ≥ 1 for pipelines).
pub fn generate(shape: Shape, tasks: usize, degree: usize, length: usize) -> Vec<Vec<usize>> {
    let (d, l) = (degree.max(1), length.max(1));
    (0..tasks)
        .map(|k| match shape {
            Shape::Bag => Vec::new(),
            // Node k's tree parent is (k-1)/d: in a fan-out it waits for that parent; in a
            // fan-in that parent waits for its d children (k*d+1 ..= k*d+d).
            Shape::FanOut => {
                if k == 0 {
                    Vec::new()
                } else {
                    vec![(k - 1) / d]
                }
            }
            Shape::FanIn => (k * d + 1..=k * d + d).filter(|&c| c < tasks).collect(),
            Shape::Pipeline => {
                if k % l == 0 {
                    Vec::new()
                } else {
                    vec![k - 1]
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(parents: Vec<Vec<usize>>) -> DagState {
        let tasks = parents
            .into_iter()
            .map(|parents| DagTask { handler: "mix".into(), args: vec![], parents, inputs: vec![] })
            .collect();
        DagState::new(tasks).unwrap()
    }

    fn out(i: usize) -> Option<ObjectLocation> {
        Some(ObjectLocation {
            name: format!("o{i}"),
            size: i as u64,
            node: i as u16,
            store: "10.0.0.1:7180".parse().unwrap(),
        })
    }

    #[test]
    fn parents_completing_out_of_order_release_each_child_exactly_once() {
        // 0,1,2 → 3; 1,2 → 4; 3,4 → 5.
        let mut d = dag(vec![vec![], vec![], vec![], vec![0, 1, 2], vec![2, 1], vec![3, 4]]);
        assert_eq!(d.start(), vec![0, 1, 2]);
        let mut released = Vec::new();
        released.extend(d.on_done(2, out(2)));
        released.extend(d.on_done(0, out(0)));
        // A duplicate report releases nothing.
        released.extend(d.on_done(2, out(2)));
        released.extend(d.on_done(1, out(1)));
        assert_eq!(released, vec![3, 4]);
        // Inputs are the parents' outputs in parent order.
        let names: Vec<String> = d.inputs_of(4).into_iter().map(|o| o.name).collect();
        assert_eq!(names, ["o2", "o1"]);
        assert_eq!(d.on_done(4, out(4)), Vec::<usize>::new());
        assert_eq!(d.on_done(3, out(3)), vec![5]);
        assert_eq!(d.on_done(3, out(3)), Vec::<usize>::new());
        assert!(!d.is_final());
        d.on_done(5, None);
        assert!(d.is_final());
    }

    #[test]
    fn a_failed_parent_fails_its_descendants_visibly() {
        // 0 → 1 → 2; 3 → 2; 3 → 4 (4 does not descend from 0).
        let mut d = dag(vec![vec![], vec![0], vec![1, 3], vec![], vec![3]]);
        assert_eq!(d.start(), vec![0, 3]);
        assert_eq!(d.on_failed(0, "input missing"), vec![1, 2]);
        assert_eq!(d.state(2), &NodeState::Failed { reason: "ancestor task 0 failed: input missing".into() });
        // 3 finishing releases 4 but not 2, failed already.
        assert_eq!(d.on_done(3, out(3)), vec![4]);
        assert!(!d.is_final());
        d.on_done(4, out(4));
        assert!(d.is_final());
        // A late report of a failed task changes nothing.
        assert_eq!(d.on_done(0, out(0)), Vec::<usize>::new());
        assert!(matches!(d.state(0), NodeState::Failed { .. }));
    }

    #[test]
    fn cycles_and_bad_parents_are_refused() {
        let t = |parents: Vec<usize>| DagTask { handler: "mix".into(), args: vec![], parents, inputs: vec![] };
        assert!(DagState::new(vec![t(vec![1]), t(vec![0])]).is_err());
        assert!(DagState::new(vec![t(vec![0])]).is_err());
        assert!(DagState::new(vec![t(vec![5])]).is_err());
    }

    #[test]
    fn shapes_have_the_documented_edges() {
        assert!(generate(Shape::Bag, 10, 10, 10).iter().all(|p| p.is_empty()));
        let fo = generate(Shape::FanOut, 7, 2, 0);
        assert_eq!(fo, vec![vec![], vec![0], vec![0], vec![1], vec![1], vec![2], vec![2]]);
        let fi = generate(Shape::FanIn, 7, 2, 0);
        assert_eq!(fi, vec![vec![1, 2], vec![3, 4], vec![5, 6], vec![], vec![], vec![], vec![]]);
        let pl = generate(Shape::Pipeline, 6, 0, 3);
        assert_eq!(pl, vec![vec![], vec![0], vec![1], vec![], vec![3], vec![4]]);
        for shape in [Shape::Bag, Shape::FanIn, Shape::FanOut, Shape::Pipeline] {
            let tasks = generate(shape, 100, 10, 10)
                .into_iter()
                .map(|parents| DagTask { handler: "mix".into(), args: vec![], parents, inputs: vec![] })
                .collect();
            assert!(DagState::new(tasks).is_ok(), "{shape:?} is a DAG");
        }
    }
}
