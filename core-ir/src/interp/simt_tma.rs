//! The simulator's tensor-memory-accelerator copies and mbarriers (`Stmt::TmaLoad`,
//! `Stmt::Mbarrier*`).
//!
//! Each program has its own mbarriers, by shared buffer and element: its arrival count, the
//! arrivals and transaction bytes its current phase has and expects, the phase's parity and
//! the copies counted on it. All threads of a program run in lockstep, so the copies and
//! arrivals of a statement are applied thread by thread in thread order.
//!
//! TMA copies are modelled at their latest, as `cp.async` (`simt_matrix.rs`): a copy is
//! checked when it is issued (its barrier, the destination's alignment and bounds, the view's
//! extents, each in-view element inside its buffer) and recorded on its barrier's current
//! phase, but moves its data only when an `MbarrierWait` completes that phase. So a kernel
//! that reads the destination before the wait reads the old contents. A phase completes at
//! the wait only if its arrivals and the bytes of its copies are exactly what it expects;
//! anything else would never complete on a GPU (or complete at a moment the hardware picks),
//! and is reported as `FaultKind::InvalidIr`, there being no kind for a hang. A phase with
//! nothing in flight completes at its last arrival, as on the GPU.
//!
//! A box's destination must start where its swizzle pattern repeats, `8 * swizzle` bytes
//! from the buffer's 1024-byte boundary (1024 for a 128-byte swizzle, 512 and 256 for the
//! others, where the lowering places such boxes): there the address-bit swizzle the
//! hardware applies is the one counted from the destination.
//!
//! Race tracking (`Track`): a copy is written by the asynchronous proxy, not by a warp, and
//! every thread has passed the wait that lands it (waits are uniform). So the landed
//! elements are recorded as written by no warp in the current barrier epoch, with no reads:
//! what a write before a barrier would leave. Any warp may then read or overwrite them
//! without a `Barrier`, while the rest of shared memory keeps its epochs. A copy does race
//! with other warps' accesses to its destination since the last barrier before its issue
//! (faulted at the issue), and with any write to it between issue and landing (faulted at
//! the landing). Its reads of global memory are tracked as the issuing thread's, at the wait.
//!
//! An ordinary access (load, store, copy, matrix operand) to the element of a live mbarrier
//! is a fault: the mbarrier's bytes are the hardware's until `MbarrierInval`. Copies never
//! waited for are a fault at the end of the program.

use super::{fault, Access, Sim, SimFault, Track};
use crate::interp::error::{FaultKind, InterpError};
use crate::interp::memory;
use crate::interp::tensor::{Data, Pointer};
use crate::thread::{LaunchValue, MBarrier, Memory as Space, Reg, TensorMap, ViewExtents};
use crate::types::ScalarType;
use std::collections::BTreeMap;

/// One issued `Stmt::TmaLoad`: one thread's box.
#[derive(Clone, Debug)]
struct PendingTma {
    /// The issuing thread.
    thread: usize,
    /// The statement serial of the issue: a write to the destination after it races.
    issued: u64,
    alloc: u32,
    param: u32,
    elem: ScalarType,
    /// Per box element: its shared element, and the buffer offset it is read from (`None`:
    /// outside the view, a zero).
    dst: Vec<i64>,
    src: Vec<Option<i64>>,
}

impl PendingTma {
    fn bytes(&self) -> u64 {
        (self.dst.len() * self.elem.size_bytes()) as u64
    }
}

/// One live mbarrier.
#[derive(Clone, Debug)]
struct Bar {
    count: u32,
    arrivals: u32,
    /// Transaction bytes the current phase expects.
    tx: u64,
    parity: i64,
    /// The copies counted on the current phase, in issue order.
    pending: Vec<PendingTma>,
    /// The barrier epoch and warp of its initialization: until the next `Barrier`, only that
    /// warp may use it, and no copy.
    init_epoch: u32,
    init_warp: u64,
}

impl Bar {
    fn busy(&self) -> bool {
        self.arrivals > 0 || self.tx > 0 || !self.pending.is_empty()
    }
    /// Why `doing` (initializing it again, invalidating it) is not allowed while it is busy.
    fn busy_message(&self, key: (u32, i64), doing: &str) -> String {
        format!(
            "{} is {doing} while its phase has {} arrivals, {} expected bytes and {} copies pending",
            bar_name(key.0, key.1),
            self.arrivals,
            self.tx,
            self.pending.len()
        )
    }
}

/// The live mbarriers of the program, by shared buffer and element.
#[derive(Clone, Debug, Default)]
pub(super) struct Mbarriers {
    live: BTreeMap<(u32, i64), Bar>,
}

/// How [`Sim::bar`] is used: by a thread, or by a copy that a thread issues.
#[derive(Clone, Copy, PartialEq, Eq)]
enum User {
    Thread,
    Copy,
}

fn bar_name(alloc: u32, index: i64) -> String {
    format!("mbarrier {index} of shared{alloc}")
}

/// The byte a box's byte `l` lands on, from the destination's start: its 16-byte chunk XORed
/// with the address bits from 7 up, as many as `swizzle / 16` chunks need.
fn swizzled(l: u64, swizzle: u32) -> u64 {
    l ^ (((l >> 7) & (swizzle as u64 / 16 - 1)) << 4)
}

/// A tensor map as one launch sees it (`Sim::launched_map`).
pub(super) struct LaunchedMap {
    pub m: TensorMap,
    /// The pointer parameter it views, and the element its pointer is at.
    pub param: u32,
    pub base: i64,
    pub elem: ScalarType,
    /// Bytes an element.
    pub eb: i64,
    /// Its extents and strides in this launch, innermost first.
    pub extents: ViewExtents,
}

impl Sim<'_> {
    /// Marks shared buffer `alloc` in use in this barrier epoch (what `touch` does for the
    /// accesses it sees), for the check of buffers that share bytes.
    pub(super) fn use_shared(&mut self, alloc: u32) {
        let epoch = self.epoch;
        self.mark_epochs(alloc as usize, epoch, epoch);
    }

    /// Per thread, the element index of `bar` where `active` holds, checked against its buffer.
    fn bar_indices(&self, bar: &MBarrier, active: &[bool]) -> Result<Vec<i64>, SimFault> {
        let idx = self.read(bar.index, Some(active))?.ints()?.to_vec();
        let len = self.k.shared[bar.alloc as usize].len as i64;
        if let Some(t) = (0..self.threads).find(|&t| active[t] && !(0..len).contains(&idx[t])) {
            return Err(fault(
                FaultKind::OutOfBounds,
                t,
                format!(
                    "mbarrier index {} is outside shared{} ({len} elements)",
                    idx[t], bar.alloc
                ),
            ));
        }
        Ok(idx)
    }

    /// The value of `r` in every thread, which must be the same in all.
    fn uniform_int(&self, r: Reg, what: &str) -> Result<i64, SimFault> {
        let v = self.read(r, None)?.ints()?;
        match v.iter().position(|&x| x != v[0]) {
            None => Ok(v[0]),
            Some(t) => Err(fault(
                FaultKind::InvalidIr,
                t,
                format!(
                    "the {what} r{} is {} in thread 0 but {} in thread {t}",
                    r.index(),
                    v[0],
                    v[t]
                ),
            )),
        }
    }

    /// The live barrier `key`, used by thread `t` (or a copy it issues).
    fn bar(&mut self, key: (u32, i64), t: usize, user: User) -> Result<&mut Bar, SimFault> {
        let (epoch, w) = (self.epoch, self.warp_bit(t));
        let warp = t / self.warp_size;
        let Some(b) = self.mbarriers.live.get_mut(&key) else {
            let message = format!("{} is used but not initialized", bar_name(key.0, key.1));
            return Err(fault(FaultKind::InvalidIr, t, message));
        };
        if b.init_epoch == epoch && (user == User::Copy || b.init_warp != w) {
            let by = match user {
                User::Copy => "a TMA copy".to_string(),
                User::Thread => format!("warp {warp}"),
            };
            let message = format!(
                "{by} uses {}, initialized by another warp with no barrier since",
                bar_name(key.0, key.1)
            );
            return Err(fault(FaultKind::MissingBarrier, t, message));
        }
        Ok(b)
    }

    /// The value a tensor map's extent or stride has in this launch.
    pub(super) fn launch_value(&self, v: LaunchValue) -> i64 {
        match v {
            LaunchValue::Const(c) => c,
            LaunchValue::Param(p) => match &self.args[p as usize].data {
                Data::Int(v) => v[0],
                _ => unreachable!("verified: an integer scalar parameter"),
            },
        }
    }

    /// `Stmt::MbarrierInit`.
    pub(super) fn mbarrier_init(&mut self, bar: &MBarrier, count: u32, pred: Option<Reg>) -> Result<(), SimFault> {
        let active = self.active(pred)?;
        let idx = self.bar_indices(bar, &active)?;
        let mut first: BTreeMap<i64, usize> = BTreeMap::new();
        for t in (0..self.threads).filter(|&t| active[t]) {
            let key = (bar.alloc, idx[t]);
            if !(1..1 << 20).contains(&count) {
                let message = format!(
                    "{} is initialized to {count} arrivals (1 to 2^20 - 1)",
                    bar_name(key.0, key.1)
                );
                return Err(fault(FaultKind::InvalidIr, t, message));
            }
            if let Some(&f) = first.get(&idx[t]) {
                let message = format!("threads {f} and {t} both initialize {}", bar_name(key.0, key.1));
                return Err(fault(FaultKind::RacingStores, t, message));
            }
            first.insert(idx[t], t);
            if let Some(b) = self.mbarriers.live.get(&key).filter(|b| b.busy()) {
                return Err(fault(FaultKind::InvalidIr, t, b.busy_message(key, "initialized again")));
            }
            let bar = Bar {
                count,
                arrivals: 0,
                tx: 0,
                parity: 0,
                pending: Vec::new(),
                init_epoch: self.epoch,
                init_warp: self.warp_bit(t),
            };
            self.mbarriers.live.insert(key, bar);
        }
        self.use_shared(bar.alloc);
        Ok(())
    }

    /// `Stmt::MbarrierArriveExpectTx`.
    pub(super) fn mbarrier_arrive_expect_tx(
        &mut self,
        bar: &MBarrier,
        bytes: u32,
        pred: Option<Reg>,
    ) -> Result<(), SimFault> {
        let active = self.active(pred)?;
        let idx = self.bar_indices(bar, &active)?;
        for t in (0..self.threads).filter(|&t| active[t]) {
            let key = (bar.alloc, idx[t]);
            let b = self.bar(key, t, User::Thread)?;
            if b.arrivals == b.count {
                let message = format!(
                    "an arrival on {} past the {} its phase expects, before the phase completes",
                    bar_name(key.0, key.1),
                    b.count
                );
                return Err(fault(FaultKind::InvalidIr, t, message));
            }
            b.arrivals += 1;
            b.tx += bytes as u64;
            // Nothing in flight: the phase completes now, as on the GPU.
            if b.arrivals == b.count && b.tx == 0 && b.pending.is_empty() {
                b.arrivals = 0;
                b.parity ^= 1;
            }
        }
        self.use_shared(bar.alloc);
        Ok(())
    }

    /// Tensor map `map` in this launch, for `what` (a copy or a store) between it and shared
    /// buffer `alloc`, checked as the runtime's encoding of the map requires
    /// (`cuTensorMapEncodeTiled`); faults name thread `first`.
    pub(super) fn launched_map(&self, map: u32, alloc: u32, first: usize, what: &str) -> Result<LaunchedMap, SimFault> {
        let m = self.k.tensor_maps[map as usize];
        let (param, base, elem) = self.space(Space::Global { param: m.param });
        let shared = self.k.shared[alloc as usize].elem;
        if shared != elem {
            let message = format!("{what} between {elem} elements and shared{alloc} of {shared}");
            return Err(fault(FaultKind::InvalidIr, first, message));
        }
        let eb = elem.size_bytes() as i64;
        let len = self.global.param_len(param).map_or(0, |l| l as i64) - base;
        let extents = m
            .extents(|v| Ok(self.launch_value(v)), len)
            .map_err(|e| fault(FaultKind::OutOfBounds, first, format!("tensor map {map}: {e}")))?;
        if (base * eb) % 16 != 0 || extents.strides.iter().any(|s| (s * eb) % 16 != 0) {
            let message = format!(
                "tensor map {map} starts at byte {} of its buffer with strides of {:?} bytes (multiples of 16)",
                base * eb,
                extents.strides.iter().map(|s| s * eb).collect::<Vec<_>>()
            );
            return Err(fault(FaultKind::Misaligned, first, message));
        }
        Ok(LaunchedMap {
            m,
            param,
            base,
            elem,
            eb,
            extents,
        })
    }

    /// What a TMA copy or store (`what`) of tensor map `map` and shared buffer `alloc`
    /// under `pred` starts with: its serial number, its active threads and its map in this
    /// launch; `None` where no thread is active.
    pub(super) fn tma_begin(
        &mut self,
        map: u32,
        alloc: u32,
        pred: Option<Reg>,
        what: &str,
    ) -> Result<Option<(Vec<bool>, LaunchedMap)>, SimFault> {
        self.serial += 1;
        let active = self.active(pred)?;
        let Some(first) = active.iter().position(|&a| a) else {
            return Ok(None);
        };
        let view = self.launched_map(map, alloc, first, what)?;
        Ok(Some((active, view)))
    }

    /// The element of shared buffer `alloc` that element `(bx, by)` of a box of `view`
    /// starting at element `start` occupies (swizzled as the map says); thread `t` faults
    /// where the box does not fit the buffer.
    pub(super) fn box_shared_element(
        &self,
        alloc: u32,
        view: &LaunchedMap,
        start: i64,
        (bx, by): (i64, i64),
        t: usize,
    ) -> Result<i64, SimFault> {
        let (m, eb) = (view.m, view.eb);
        let [bw, bh] = m.box_dims.map(|d| d as i64);
        let len = self.k.shared[alloc as usize].len;
        let l = ((by * bw + bx) * eb) as u64;
        let at = start + (swizzled(l, m.swizzle) as i64) / eb;
        if !(0..len as i64).contains(&at) {
            let message =
                format!("a TMA box of {bw} x {bh} from element {start} does not fit shared{alloc} ({len} elements)");
            return Err(fault(FaultKind::OutOfBounds, t, message));
        }
        Ok(at)
    }

    /// The offset in its buffer of the element of tensor map `map` (`view` in this launch)
    /// at `coords` (`x`, `y`, then the outer dimensions), `None` outside the view (where
    /// copies fill zeros and stores write nothing); an element of the view outside its
    /// buffer faults thread `t`, `what` (with `...` for the map) naming the access.
    pub(super) fn map_element(
        &self,
        map: u32,
        view: &LaunchedMap,
        coords: &[i64],
        t: usize,
        what: &str,
    ) -> Result<Option<i64>, SimFault> {
        let ViewExtents { dims, strides } = &view.extents;
        if coords.iter().zip(dims).any(|(c, d)| !(0..*d).contains(c)) {
            return Ok(None);
        }
        let offset = coords[1..]
            .iter()
            .zip(strides)
            .try_fold(coords[0], |o, (c, s)| {
                c.checked_mul(*s).and_then(|cs| o.checked_add(cs))
            })
            .and_then(|o| o.checked_add(view.base))
            .unwrap_or(i64::MAX);
        let param = view.param;
        self.global.locate(Pointer { param, offset }).map_err(|f| {
            let through = format!("through tensor map {map} (extents {dims:?}, strides {strides:?})");
            let message = format!(
                "{} its element {coords:?}: {}",
                what.replace("...", &through),
                f.message
            );
            fault(f.kind, t, message)
        })?;
        Ok(Some(offset))
    }

    /// `Stmt::TmaLoad`: checks each active thread's copy and records it on its barrier's
    /// current phase; nothing is written until the wait.
    pub(super) fn tma_load(
        &mut self,
        map: u32,
        alloc: u32,
        dst: Reg,
        coords: &[Reg],
        bar: &MBarrier,
        pred: Option<Reg>,
    ) -> Result<(), SimFault> {
        let Some((active, view)) = self.tma_begin(map, alloc, pred, "a TMA copy")? else {
            return Ok(());
        };
        let to = self.k.shared[alloc as usize];
        let first = active.iter().position(|&a| a).expect("an active thread");
        let (m, param, elem, eb) = (view.m, view.param, view.elem, view.eb);
        // The hardware swizzles address bits; the formula below counts them from the
        // destination, which is right when it starts where the pattern repeats.
        let repeat = 8 * m.swizzle as i64;
        if (to.align as i64) % repeat != 0 {
            let message = format!(
                "shared{alloc} starts on a {}-byte boundary, a TMA copy's swizzle repeats every {repeat} bytes",
                to.align
            );
            return Err(fault(FaultKind::Misaligned, first, message));
        }
        let dsts = self.read(dst, Some(&active))?.ints()?.to_vec();
        let mut cs = Vec::with_capacity(coords.len());
        for &c in coords {
            cs.push(self.read(c, Some(&active))?.ints()?.to_vec());
        }
        let idx = self.bar_indices(bar, &active)?;
        let [bw, bh] = m.box_dims.map(|d| d as i64);
        for t in (0..self.threads).filter(|&t| active[t]) {
            let key = (bar.alloc, idx[t]);
            self.bar(key, t, User::Copy)?;
            let start = dsts[t].wrapping_mul(eb);
            if start % repeat != 0 {
                let message = format!(
                    "a TMA copy to byte {start} of shared{alloc}, not a multiple of the {repeat} bytes its {}-byte swizzle repeats in",
                    m.swizzle
                );
                return Err(fault(FaultKind::Misaligned, t, message));
            }
            let mut copy = PendingTma {
                thread: t,
                issued: self.serial,
                alloc,
                param,
                elem,
                dst: Vec::with_capacity((bw * bh) as usize),
                src: Vec::with_capacity((bw * bh) as usize),
            };
            // The box's first element, then each element's coordinates in turn.
            let origin: Vec<i64> = cs.iter().map(|c| c[t]).collect();
            let mut at = origin.clone();
            for by in 0..bh {
                for bx in 0..bw {
                    copy.dst
                        .push(self.box_shared_element(alloc, &view, dsts[t], (bx, by), t)?);
                    at[0] = origin[0] + bx;
                    at[1] = origin[1] + by;
                    copy.src
                        .push(self.map_element(map, &view, &at, t, "a TMA copy ... reads")?);
                }
            }
            // The copy may write from now on: it races with other warps' accesses since
            // the last barrier (a probe: its write is recorded when it lands), and with
            // the operand reads of a wgmma not yet waited for.
            for &e in &copy.dst {
                self.mbarrier_guard(alloc, e, t)?;
                if self.wgmmas.reads_shared(alloc, e) {
                    let message = format!(
                        "a TMA copy into element {e} of shared{alloc} is issued while a wgmma that reads it is not yet waited for (its stage freed too early)"
                    );
                    return Err(fault(FaultKind::MissingBarrier, t, message));
                }
                let mut probe = self.track[alloc as usize][e as usize];
                if probe.program == self.program {
                    probe
                        .access(Access::Write { same: false }, self.epoch, self.serial, self.thread_bits(t))
                        .map_err(|what| {
                            let message = format!(
                                "a TMA copy issued by warp {} overwrites element {e} of shared{alloc}, which another thread {what} with no barrier since",
                                t / self.warp_size
                            );
                            fault(FaultKind::MissingBarrier, t, message)
                        })?;
                }
            }
            self.mbarriers
                .live
                .get_mut(&key)
                .expect("checked above")
                .pending
                .push(copy);
        }
        self.use_shared(alloc);
        self.use_shared(bar.alloc);
        Ok(())
    }

    /// `Stmt::MbarrierWait`, by every thread: returns at once if the phase of that parity is
    /// the previous one; otherwise the current phase must complete now, and its copies land.
    /// `false` where it cannot: in lockstep a hang ([`Sim::never_completes`]), on a side of
    /// a warp-specialized statement a wait for the other side.
    pub(super) fn mbarrier_try_wait(&mut self, bar: &MBarrier, parity: Reg) -> Result<bool, SimFault> {
        let (key, p) = self.waited_phase(bar, parity)?;
        let b = self.bar(key, 0, User::Thread)?;
        if p != b.parity {
            self.ordered_by_wait();
            return Ok(true);
        }
        let bytes: u64 = b.pending.iter().map(PendingTma::bytes).sum();
        if b.arrivals != b.count || bytes != b.tx {
            return Ok(false);
        }
        let copies = std::mem::take(&mut b.pending);
        b.arrivals = 0;
        b.tx = 0;
        b.parity ^= 1;
        self.ordered_by_wait();
        for c in &copies {
            self.land(c)?;
        }
        Ok(true)
    }

    /// A side of a warp-specialized statement that passes a wait is ordered after what the
    /// other side did before the arrivals that completed the phase (its reads of a stage it
    /// then handed back, its copies' issue): for race tracking, a barrier. (The sides meet
    /// only there, so a race between them that no mbarrier orders is not caught.)
    fn ordered_by_wait(&mut self) {
        if self.in_side {
            self.epoch += 1;
        }
    }

    /// The barrier and parity a wait names, checked: uniform, a parity, a live barrier that
    /// every warp may use.
    fn waited_phase(&mut self, bar: &MBarrier, parity: Reg) -> Result<((u32, i64), i64), SimFault> {
        let index = self.uniform_int(bar.index, "mbarrier index")?;
        let p = self.uniform_int(parity, "mbarrier parity")?;
        if p != 0 && p != 1 {
            return Err(fault(
                FaultKind::InvalidIr,
                0,
                format!("a wait for parity {p} (0 or 1)"),
            ));
        }
        let all = vec![true; self.threads];
        self.bar_indices(bar, &all)?;
        self.use_shared(bar.alloc);
        let key = (bar.alloc, index);
        // Every warp uses it: the first thread of each.
        for t in (0..self.threads).step_by(self.warp_size.max(1)) {
            self.bar(key, t, User::Thread)?;
        }
        Ok((key, p))
    }

    /// Why a wait that [`Sim::mbarrier_try_wait`] could not pass would hang a GPU.
    pub(super) fn never_completes(&mut self, bar: &MBarrier, parity: Reg) -> SimFault {
        let (key, p) = match self.waited_phase(bar, parity) {
            Ok(w) => w,
            Err(f) => return f,
        };
        let b = match self.bar(key, 0, User::Thread) {
            Ok(b) => b,
            Err(f) => return f,
        };
        let bytes: u64 = b.pending.iter().map(PendingTma::bytes).sum();
        let message = format!(
            "phase {p} of {} can never complete (a GPU would hang here): it has {} of {} arrivals, and copies of {bytes} bytes against {} expected",
            bar_name(key.0, key.1),
            b.arrivals,
            b.count,
            b.tx
        );
        fault(FaultKind::InvalidIr, 0, message)
    }

    /// `Stmt::MbarrierArrive`: an arrival of each active thread, no bytes.
    pub(super) fn mbarrier_arrive(&mut self, bar: &MBarrier, pred: Option<Reg>) -> Result<(), SimFault> {
        self.mbarrier_arrive_expect_tx(bar, 0, pred)
    }

    /// Moves one copy's data into shared memory: the view's elements, zeros outside it.
    fn land(&mut self, c: &PendingTma) -> Result<(), SimFault> {
        self.serial += 1;
        let from = Space::Global { param: c.param };
        for &o in c.src.iter().flatten() {
            self.touch(from, o, c.thread, Access::Read)?;
        }
        let src: Vec<Pointer> = c
            .src
            .iter()
            .map(|o| Pointer {
                param: c.param,
                offset: o.unwrap_or(0),
            })
            .collect();
        let inside: Vec<bool> = c.src.iter().map(Option::is_some).collect();
        let data = memory::load(&self.global, c.elem, &src, Some(&inside), None)?;
        for &e in &c.dst {
            self.mbarrier_guard(c.alloc, e, c.thread)?;
            let track = &self.track[c.alloc as usize][e as usize];
            if track.program == self.program && track.write_epoch != 0 && track.write_stmt > c.issued {
                let by = match track.writers {
                    0 => "another TMA copy".to_string(),
                    w => format!("warp {}", (w as u64).trailing_zeros()),
                };
                let message = format!(
                    "element {e} of shared{} is written by {by} while a TMA copy into it is in flight",
                    c.alloc
                );
                return Err(fault(FaultKind::MissingBarrier, c.thread, message));
            }
        }
        let dst: Vec<Pointer> = c
            .dst
            .iter()
            .map(|&e| Pointer {
                param: c.alloc,
                offset: e,
            })
            .collect();
        memory::store(&mut self.shared, c.elem, &dst, None, &data)?;
        // Written by no warp in this epoch, read by none: every thread has passed the wait.
        let landed = Track {
            program: self.program,
            write_epoch: self.epoch,
            write_stmt: self.serial,
            writers: 0,
            write_atomic: false,
            read_epoch: 0,
            readers: 0,
            clobbered_by: 0,
        };
        for &e in &c.dst {
            self.clobber(c.alloc as usize, e);
            self.track[c.alloc as usize][e as usize] = landed;
        }
        self.use_shared(c.alloc);
        Ok(())
    }

    /// `Stmt::MbarrierInval`.
    pub(super) fn mbarrier_inval(&mut self, bar: &MBarrier, pred: Option<Reg>) -> Result<(), SimFault> {
        let active = self.active(pred)?;
        let idx = self.bar_indices(bar, &active)?;
        for t in (0..self.threads).filter(|&t| active[t]) {
            let key = (bar.alloc, idx[t]);
            let b = self.bar(key, t, User::Thread)?;
            if b.busy() {
                return Err(fault(FaultKind::InvalidIr, t, b.busy_message(key, "invalidated")));
            }
            self.mbarriers.live.remove(&key);
        }
        self.use_shared(bar.alloc);
        Ok(())
    }

    /// Faults an ordinary access by thread `t` to element `e` of shared buffer `alloc` if it
    /// holds a live mbarrier.
    pub(super) fn mbarrier_guard(&self, alloc: u32, e: i64, t: usize) -> Result<(), SimFault> {
        if self.mbarriers.live.is_empty() || !self.mbarriers.live.contains_key(&(alloc, e)) {
            return Ok(());
        }
        let message = format!(
            "element {e} of shared{alloc} is a live mbarrier: other accesses are undefined until its `mbarrier.inval`"
        );
        Err(fault(FaultKind::InvalidIr, t, message))
    }

    /// At the end of a program: every copy must have landed.
    pub(super) fn check_tma_done(&self) -> Result<(), InterpError> {
        for (&(alloc, index), b) in &self.mbarriers.live {
            if let Some(c) = b.pending.first() {
                return Err(InterpError::ThreadFault {
                    kind: FaultKind::InvalidIr,
                    stmt: String::new(),
                    context: String::new(),
                    program: self.pid,
                    thread: Some(c.thread as u32),
                    message: format!(
                        "a TMA copy never completed: the program ends with {} copies into shared{} on phase {} of {}, never waited for",
                        b.pending.len(),
                        c.alloc,
                        b.parity,
                        bar_name(alloc, index)
                    ),
                });
            }
        }
        Ok(())
    }
}
