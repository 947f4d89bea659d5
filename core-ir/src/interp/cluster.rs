//! Clusters: launches whose programs are grouped, `n` consecutive programs along grid axis 0
//! a cluster, so that `cluster_reduce` combines a number over the programs of a cluster.
//!
//! Why threads: a program that reaches `cluster_reduce` has to stop where it is — maybe
//! deep in loops and branches of the evaluator's recursion — until every program of its
//! cluster has reached the same reduction, and then go on with the combined value. The
//! evaluator keeps a program's state on the Rust stack, so each program of a cluster runs
//! on an OS thread of its own: `n` scoped threads a launch, thread `r` running the program
//! of rank `r` (the `r`-th of its cluster) of every cluster in turn, each with its own
//! [`Program`] (whose `Rc`s never leave the thread).
//!
//! Why a baton: only one of the threads runs at a time. The baton (a mutex-guarded state
//! and one condition variable a rank) passes in rank order: the holder runs until its
//! program reaches a `cluster_reduce` (it leaves its value and hands the baton to the next
//! rank) or ends (it marks itself finished and hands the baton on). The last rank ends the
//! round: when every program waits at a reduction it combines their values, in rank order,
//! and hands the baton back to rank 0, each program picking up the result when the baton
//! comes to it; when every program has finished, the next cluster starts at its rank 0.
//! So a launch is deterministic: memory is accessed by one program at a time, in a fixed
//! order (each cluster's programs, stretch by stretch between reductions, rank 0 first),
//! and atomics and racing stores resolve in that order.
//!
//! What stops a launch: the first fault of any program (the baton holder's, since only it
//! runs), a round in which some programs finished while others wait at a reduction
//! ([`InterpError::ClusterReduceMismatch`]), or a reduction whose programs pass values of
//! different types or ask for different combinations (an invalid-IR fault). The other
//! threads are then woken, see the launch stopped, and return without running further.
//! A thread that panics stops the launch the same way on its way out, and the launching
//! thread resumes the panic once every thread has ended: nothing waits for a baton that
//! can no longer come.

use super::buffer::HostBuffer;
use super::debug_ops;
use super::error::{invalid, pid, Fault, FaultKind, InterpError};
use super::eval::Program;
use super::memory::{Buffers, Memory};
use super::shape_ops;
use super::tensor::{Data, Tensor};
use crate::ir::{Kernel, ReduceOp, SourceLoc};
use crate::types::{Shape, Type};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

/// `value`s (scalars of type `ty`, in rank order) combined by `op` (`Sum`, `Max` or `Min`):
/// the reduction of the block of them, so that float `max`/`min` propagate NaN, float sums
/// add in rank order (in f64, rounded once to the type) and integer sums wrap, exactly as
/// the `sum`, `max` and `min` of a block do.
pub(crate) fn combine(op: ReduceOp, values: &[&Tensor], ty: Type) -> Result<Tensor, Fault> {
    if !matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) {
        return Err(invalid!(
            "cluster_reduce combines by sum, max or min, not {}",
            op.name()
        ));
    }
    let number = ty
        .scalar_type()
        .filter(|s| ty.is_scalar() && (s.is_int() || s.is_float()));
    if number.is_none() {
        return Err(invalid!("cluster_reduce combines scalar numbers, not {ty}"));
    }
    if let Some(v) = values.iter().find(|v| v.ty != ty) {
        return Err(invalid!("cluster_reduce of {} as {ty}", v.ty));
    }
    let data = match values.first().map(|v| &v.data) {
        Some(Data::Int(_)) => Data::Int(
            values
                .iter()
                .map(|v| v.ints().map(|x| x[0]))
                .collect::<Result<_, _>>()?,
        ),
        Some(Data::Float(_)) => Data::Float(
            values
                .iter()
                .map(|v| v.floats().map(|x| x[0]))
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err(invalid!("cluster_reduce of {} values of {ty}", values.len())),
    };
    let shape = Shape::new(&[values.len() as u32]).expect("rank 1");
    let block = Tensor {
        ty: Type::block(ty.elem, shape),
        data,
    };
    shape_ops::reduce(op, &block, 0, ty)
}

/// The launch's buffers, shared by the threads of a cluster's programs: a raw pointer to
/// the slice that [`run`] borrows mutably for the whole launch.
///
/// Every program thread has its own handle (made by [`SharedBuffers::share`]); a handle
/// is dereferenced only through [`Buffers`], that is, while its program runs, and a
/// program runs only while its thread holds the baton. See [`SharedBuffers::get_mut`] for
/// why that makes the accesses sound.
pub(crate) struct SharedBuffers<'a> {
    ptr: NonNull<HostBuffer>,
    len: usize,
    _borrow: PhantomData<&'a mut [HostBuffer]>,
}

// SAFETY: a handle gives access to `HostBuffer`s (which are `Send`: asserted below) from
// the thread it is moved to; the baton orders the accesses of all threads (see `get_mut`).
unsafe impl Send for SharedBuffers<'_> {}

const _: () = {
    const fn send<T: Send>() {}
    send::<HostBuffer>();
};

impl<'a> SharedBuffers<'a> {
    fn new(buffers: &'a mut [HostBuffer]) -> Self {
        SharedBuffers {
            len: buffers.len(),
            ptr: NonNull::from(buffers).cast(),
            _borrow: PhantomData,
        }
    }

    /// Another handle to the same buffers.
    ///
    /// # Safety
    ///
    /// The caller dereferences at most one handle at a time, and orders one handle's
    /// accesses before another's by synchronization (here: the baton's mutex).
    unsafe fn share(&self) -> Self {
        SharedBuffers {
            ptr: self.ptr,
            len: self.len,
            _borrow: PhantomData,
        }
    }

    #[inline]
    pub(super) fn get(&self) -> &[HostBuffer] {
        // SAFETY: as for `get_mut`; a shared reference is a weaker form of the same access.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    #[inline]
    pub(super) fn get_mut(&mut self) -> &mut [HostBuffer] {
        // SAFETY: `ptr` and `len` come from a `&'a mut [HostBuffer]` that `run` holds for the
        // whole launch (and `'a` outlives every handle), so the slice is valid and nothing
        // outside the launch's threads touches it meanwhile. Handles live in the programs of
        // the cluster's threads, and a program touches memory only while it runs, which it
        // does only while its thread holds the baton: between taking the baton (`wait`,
        // under the mutex) and handing it on (`pass` or `stop`, under the mutex). So at most
        // one thread dereferences a handle at any time, and the mutex's release and acquire
        // order each holder's accesses before the next holder's. The reference returned
        // borrows this handle and so cannot outlive the memory op that asked for it: none
        // is alive when a program hands the baton on, which it does inside `cluster_reduce`
        // or after its program has ended.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// A program's place in its cluster, for its `cluster_reduce`s.
pub(crate) struct Member<'a> {
    baton: &'a Baton,
    rank: usize,
}

impl Member<'_> {
    /// Leaves `value` for the reduction, hands the baton on, and waits for the baton to
    /// come back with the combined value. An error here means that the launch stopped (its
    /// error is recorded already): the program is to end without running further.
    pub(crate) fn reduce(&self, op: ReduceOp, value: &Tensor, pid: [u32; 3], loc: SourceLoc) -> Result<Tensor, Fault> {
        let mut result = self.exchange(How::Op(op), vec![value.clone()], pid, loc)?;
        result
            .pop()
            .ok_or_else(|| invalid!("interpreter bug: no cluster_reduce result"))
    }

    /// Leaves the tuple `values` for a reduction with a combine region, and gives back the
    /// tuples of every program of the cluster, in rank order, for the program to combine
    /// itself (the evaluator runs regions). Errors as [`Member::reduce`].
    pub(crate) fn gather(&self, values: Vec<Tensor>, pid: [u32; 3], loc: SourceLoc) -> Result<Vec<Vec<Tensor>>, Fault> {
        let n = values.len();
        let all = self.exchange(How::Combine, values, pid, loc)?;
        if n == 0 || all.len() != n * self.baton.size() {
            return Err(invalid!(
                "interpreter bug: {} values gathered for {n} a program",
                all.len()
            ));
        }
        Ok(all.chunks(n).map(<[Tensor]>::to_vec).collect())
    }

    /// Leaves `values` at the round's reduction, hands the baton on, and waits for it to
    /// come back with the round's result.
    fn exchange(&self, how: How, values: Vec<Tensor>, pid: [u32; 3], loc: SourceLoc) -> Result<Vec<Tensor>, Fault> {
        let baton = self.baton;
        let mut st = baton.lock();
        let cluster = st.cluster;
        st.stands[self.rank] = Stand::Waiting(Deposit { how, values, pid, loc });
        baton.pass(&mut st, self.rank);
        let mut st = baton.wait(st, self.rank, cluster).map_err(|Stopped| stopped())?;
        st.stands[self.rank] = Stand::Running;
        st.result
            .clone()
            .ok_or_else(|| invalid!("interpreter bug: no cluster_reduce result"))
    }
}

/// The fault a program ends with when the launch stopped elsewhere (never reported: the
/// launch's error is the one recorded first).
fn stopped() -> Fault {
    Fault {
        kind: FaultKind::InvalidIr,
        message: "the launch stopped in another program of the cluster".into(),
    }
}

/// The launch has stopped: the thread is to end.
struct Stopped;

/// How a round's values combine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    /// `cluster_reduce`: one value a program, combined by the op here.
    Op(ReduceOp),
    /// `cluster_reduce_n`: a tuple a program, every program's tuple handed back to each
    /// program, which combines them with its region.
    Combine,
}

impl How {
    fn name(self) -> &'static str {
        match self {
            How::Op(op) => op.name(),
            How::Combine => "a combine region",
        }
    }
}

/// The values a program left at a reduction.
struct Deposit {
    how: How,
    values: Vec<Tensor>,
    pid: [u32; 3],
    loc: SourceLoc,
}

/// Where the program of a rank stands in the current round.
enum Stand {
    Running,
    Waiting(Deposit),
    Finished([u32; 3]),
}

/// No rank: the baton before the threads are all started.
const NOBODY: usize = usize::MAX;

struct State {
    /// The cluster running now, by its place in launch order.
    cluster: usize,
    /// The rank holding the baton: the only one whose program runs.
    holder: usize,
    /// Per rank, where its program stands in the current round.
    stands: Vec<Stand>,
    /// The reductions the current cluster has completed.
    rounds: u64,
    /// The result of the last reduction, which each rank picks up when the baton comes: the
    /// combined value, or every program's tuple in rank order (`How::Combine`).
    result: Option<Vec<Tensor>>,
    /// Set on the first error or panic: every thread then ends.
    stopped: bool,
    /// The launch's error, the first one recorded.
    error: Option<InterpError>,
    /// Whether the launching thread captures prints ([`debug_ops::capture_prints`]).
    capture: bool,
    /// What the programs printed, in order, for the launching thread's capture.
    printed: String,
}

struct Baton {
    state: Mutex<State>,
    /// Rank `r` waits on `turns[r]` for the baton.
    turns: Vec<Condvar>,
    /// The launch's grid, in clusters: `grid[0]` counts clusters.
    clusters: [u32; 3],
}

impl Baton {
    /// The baton of a launch of `grid` in clusters of `n` programs, held by nobody yet.
    fn new(n: usize, grid: [u32; 3], capture: bool) -> Baton {
        Baton {
            state: Mutex::new(State {
                cluster: 0,
                holder: NOBODY,
                stands: (0..n).map(|_| Stand::Running).collect(),
                rounds: 0,
                result: None,
                stopped: false,
                error: None,
                capture,
                printed: String::new(),
            }),
            turns: (0..n).map(|_| Condvar::new()).collect(),
            clusters: [grid[0] / n as u32, grid[1], grid[2]],
        }
    }

    fn size(&self) -> usize {
        self.turns.len()
    }

    /// The number of clusters of the launch.
    fn count(&self) -> usize {
        self.clusters.iter().map(|&c| c as usize).product()
    }

    /// The first program of cluster `c` (in launch order: axis 0 fastest).
    fn first(&self, c: usize) -> [u32; 3] {
        let [cx, cy, _] = self.clusters.map(|c| c as usize);
        let x = c % cx * self.size();
        [x as u32, (c / cx % cy) as u32, (c / (cx * cy)) as u32]
    }

    /// The state, also after a thread panicked holding the lock (the panic then stops the
    /// launch, see [`Release`]; the state is only read to end the threads).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `rank` holds the baton in cluster `cluster`, or the launch stops.
    fn wait<'s>(
        &'s self,
        mut st: MutexGuard<'s, State>,
        rank: usize,
        cluster: usize,
    ) -> Result<MutexGuard<'s, State>, Stopped> {
        loop {
            if st.stopped {
                return Err(Stopped);
            }
            if st.holder == rank && st.cluster == cluster {
                return Ok(st);
            }
            st = self.turns[rank].wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn hand_to(&self, st: &mut State, rank: usize) {
        st.holder = rank;
        self.turns[rank].notify_one();
    }

    /// Collects what the holder printed, for the launching thread.
    fn collect_prints(&self, st: &mut State) {
        if st.capture {
            let text = debug_ops::take_captured();
            st.printed.push_str(&text);
        }
    }

    /// Hands the baton on from `rank`, whose program waits at a reduction or has finished;
    /// after the last rank, ends the round.
    fn pass(&self, st: &mut State, rank: usize) {
        self.collect_prints(st);
        if rank + 1 < self.size() {
            return self.hand_to(st, rank + 1);
        }
        let finished = st.stands.iter().find_map(|s| match s {
            Stand::Finished(pid) => Some(*pid),
            _ => None,
        });
        let waiting = st.stands.iter().find_map(|s| match s {
            Stand::Waiting(d) => Some(d),
            _ => None,
        });
        match (finished, waiting) {
            (Some(finished), Some(waiting)) => {
                let error = InterpError::ClusterReduceMismatch {
                    loc: waiting.loc,
                    first: self.first(st.cluster),
                    size: self.size() as u32,
                    finished,
                    waiting: waiting.pid,
                    reductions: st.rounds,
                };
                self.stop(st, Some(error));
            }
            (None, Some(_)) => match self.combine(st) {
                Ok(result) => {
                    st.result = Some(result);
                    st.rounds += 1;
                    self.hand_to(st, 0);
                }
                Err(error) => self.stop(st, Some(error)),
            },
            // Every program finished: the next cluster (if any) starts.
            _ => {
                st.cluster += 1;
                st.rounds = 0;
                st.result = None;
                st.stands.iter_mut().for_each(|s| *s = Stand::Running);
                if st.cluster < self.count() {
                    self.hand_to(st, 0);
                }
            }
        }
    }

    /// The values left at the round's reduction combined, or an invalid-IR fault of the
    /// last rank's `cluster_reduce` when the programs disagree on the type or combination.
    fn combine(&self, st: &State) -> Result<Vec<Tensor>, InterpError> {
        let deposits: Vec<&Deposit> = st
            .stands
            .iter()
            .filter_map(|s| match s {
                Stand::Waiting(d) => Some(d),
                _ => None,
            })
            .collect();
        let (first, last) = (deposits[0], deposits[deposits.len() - 1]);
        let fault = |message: String| InterpError::Fault {
            kind: FaultKind::InvalidIr,
            op: "cluster_reduce",
            loc: last.loc,
            program: last.pid,
            message,
        };
        let round = st.rounds + 1;
        let types = |d: &Deposit| match &d.values[..] {
            [one] => one.ty.to_string(),
            many => format!(
                "({})",
                many.iter().map(|v| v.ty.to_string()).collect::<Vec<_>>().join(", ")
            ),
        };
        if let Some(d) = deposits.iter().find(|d| {
            d.values.len() != first.values.len() || d.values.iter().zip(&first.values).any(|(a, b)| a.ty != b.ty)
        }) {
            return Err(fault(format!(
                "at cluster reduction {round}, program {} passes {} but program {} passes {}",
                pid(&first.pid),
                types(first),
                pid(&d.pid),
                types(d)
            )));
        }
        if let Some(d) = deposits.iter().find(|d| d.how != first.how) {
            return Err(fault(format!(
                "at cluster reduction {round}, program {} combines by {} but program {} by {}",
                pid(&first.pid),
                first.how.name(),
                pid(&d.pid),
                d.how.name()
            )));
        }
        match first.how {
            How::Op(op) => {
                let values: Vec<&Tensor> = deposits.iter().map(|d| &d.values[0]).collect();
                let ty = first.values[0].ty;
                Ok(vec![combine(op, &values, ty).map_err(|f| fault(f.message))?])
            }
            How::Combine => Ok(deposits.iter().flat_map(|d| d.values.iter().cloned()).collect()),
        }
    }

    /// Stops the launch with `error` (unless it stopped already) and wakes every thread.
    fn stop(&self, st: &mut State, error: Option<InterpError>) {
        if !st.stopped {
            st.error = error;
            st.stopped = true;
        }
        self.turns.iter().for_each(Condvar::notify_one);
    }
}

/// Stops the launch when its thread unwinds from a panic, so that no other thread waits
/// for a baton the panicking one will never hand on.
struct Release<'s>(&'s Baton);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            let mut st = self.0.lock();
            self.0.stop(&mut st, None);
        }
    }
}

/// What every program thread of a launch reads.
struct Launch<'a> {
    kernel: &'a Kernel,
    grid: [u32; 3],
    params: Vec<Tensor>,
    param_buffer: Vec<Option<(usize, usize)>>,
    param_names: Vec<&'a str>,
    baton: Baton,
    hints: Option<std::sync::Arc<super::hints::HintChecks>>,
}

/// The thread of rank `rank`: runs the program of that rank of every cluster, in order.
fn rank_thread(launch: &Launch<'_>, rank: usize, buffers: SharedBuffers<'_>, capture: bool) {
    let baton = &launch.baton;
    let _release = Release(baton);
    if capture {
        debug_ops::begin_capture();
    }
    let mem = Memory {
        buffers: Buffers::Shared(buffers),
        param_buffer: launch.param_buffer.clone(),
        param_names: launch.param_names.clone(),
    };
    let mut program = Program::new(
        launch.kernel,
        launch.grid,
        mem,
        launch.params.clone(),
        launch.hints.clone(),
    )
    .in_cluster(Member { baton, rank });
    for cluster in 0..baton.count() {
        let first = baton.first(cluster);
        let Ok(st) = baton.wait(baton.lock(), rank, cluster) else {
            return;
        };
        // The program runs without the lock: the other threads wait for the baton.
        drop(st);
        let result = program.run([first[0] + rank as u32, first[1], first[2]]);
        let mut st = baton.lock();
        match result {
            Ok(()) => {
                st.stands[rank] = Stand::Finished([first[0] + rank as u32, first[1], first[2]]);
                baton.pass(&mut st, rank);
            }
            Err(error) => {
                baton.collect_prints(&mut st);
                baton.stop(&mut st, Some(error));
                return;
            }
        }
    }
}

/// Runs the launch in clusters of `size` programs (2 to [`super::MAX_CLUSTER`], dividing
/// `grid[0]`), one after another in program order (axis 0 fastest), each cluster's programs
/// taking turns as the module documentation says.
pub(crate) fn run(
    kernel: &Kernel,
    grid: [u32; 3],
    size: u32,
    buffers: &mut [HostBuffer],
    bound: super::BoundArgs<'_>,
) -> Result<(), InterpError> {
    let n = size as usize;
    let capture = debug_ops::capturing();
    let launch = Launch {
        kernel,
        grid,
        params: bound.params,
        param_buffer: bound.param_buffer,
        param_names: bound.param_names,
        baton: Baton::new(n, grid, capture),
        hints: bound.hints,
    };
    let shared = SharedBuffers::new(buffers);
    let (joined, spawn_error) = thread::scope(|s| {
        let launch = &launch;
        let mut handles = Vec::with_capacity(n);
        let mut spawn_error = None;
        for rank in 0..n {
            // SAFETY: each handle is dereferenced only by its program while its thread holds
            // the baton (see `SharedBuffers::get_mut`); `shared` itself never is.
            let buffers = unsafe { shared.share() };
            let spawned = thread::Builder::new()
                .name(format!("cluster rank {rank}"))
                .spawn_scoped(s, move || rank_thread(launch, rank, buffers, capture));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        // Every thread is waiting for the baton: rank 0 of the first cluster starts, or, if
        // a thread could not start, all of them end.
        {
            let baton = &launch.baton;
            let mut st = baton.lock();
            if spawn_error.is_some() {
                baton.stop(&mut st, None);
            } else {
                baton.hand_to(&mut st, 0);
            }
        }
        let joined: Vec<thread::Result<()>> = handles.into_iter().map(|h| h.join()).collect();
        (joined, spawn_error)
    });
    if let Some(e) = spawn_error {
        panic!("could not start the {n} threads of a cluster's programs: {e}");
    }
    for result in joined {
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
    }
    let count = launch.baton.count();
    let st = launch.baton.state.into_inner().unwrap_or_else(PoisonError::into_inner);
    debug_ops::append_captured(&st.printed);
    match st.error {
        Some(error) => Err(error),
        None => {
            debug_assert_eq!(st.cluster, count, "every cluster ran");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_go_in_launch_order() {
        let baton = Baton::new(4, [8, 3, 2], false);
        assert_eq!(baton.count(), 12);
        let firsts: Vec<[u32; 3]> = (0..12).map(|c| baton.first(c)).collect();
        let mut want = Vec::new();
        for z in 0..2 {
            for y in 0..3 {
                for x in [0, 4] {
                    want.push([x, y, z]);
                }
            }
        }
        assert_eq!(firsts, want);
    }

    #[test]
    fn a_panicking_holder_releases_the_waiting_threads() {
        let baton = Baton::new(3, [3, 1, 1], false);
        let baton = &baton;
        thread::scope(|s| {
            // Ranks 1 and 2 wait for the baton, which rank 0 never hands on.
            let waiters: Vec<_> = (1..3)
                .map(|rank| s.spawn(move || baton.wait(baton.lock(), rank, 0).is_err()))
                .collect();
            let holder = s.spawn(|| {
                let _release = Release(baton);
                let st = baton.wait(baton.lock(), 0, 0);
                assert!(st.is_ok());
                drop(st);
                panic!("a bug while holding the baton");
            });
            let mut st = baton.lock();
            baton.hand_to(&mut st, 0);
            drop(st);
            assert!(holder.join().is_err());
            for w in waiters {
                assert!(w.join().unwrap(), "a waiting thread sees the launch stopped");
            }
        });
        let st = baton.lock();
        assert!(st.stopped && st.error.is_none());
    }

    #[test]
    fn a_panic_under_the_lock_still_releases_the_others() {
        let baton = Baton::new(2, [2, 1, 1], false);
        let baton = &baton;
        thread::scope(|s| {
            let waiter = s.spawn(move || baton.wait(baton.lock(), 1, 0).is_err());
            let holder = s.spawn(|| {
                let _release = Release(baton);
                let st = baton.wait(baton.lock(), 0, 0).ok().unwrap();
                // Poisons the mutex.
                let _held = st;
                panic!("a bug under the lock");
            });
            let mut st = baton.lock();
            baton.hand_to(&mut st, 0);
            drop(st);
            assert!(holder.join().is_err());
            assert!(waiter.join().unwrap());
        });
        assert!(baton.state.is_poisoned());
    }
}
