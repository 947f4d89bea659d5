//! The simulator's tensor-memory-accelerator copies and mbarriers (`Stmt::TmaLoad`,
//! `Stmt::Mbarrier*`). (Not simulated yet: every such statement faults.)

use super::{Sim, SimFault};
use crate::interp::error::FaultKind;
use crate::thread::{MBarrier, Reg};

impl Sim<'_> {
    fn tma_unsupported(&self, what: &str) -> Result<(), SimFault> {
        Err(SimFault {
            kind: FaultKind::InvalidIr,
            thread: None,
            message: format!("`{what}` is not simulated"),
        })
    }
    pub(super) fn mbarrier_init(&mut self, _bar: &MBarrier, _count: u32, _pred: Option<Reg>) -> Result<(), SimFault> {
        self.tma_unsupported("mbarrier.init")
    }
    pub(super) fn mbarrier_arrive_expect_tx(
        &mut self,
        _bar: &MBarrier,
        _bytes: u32,
        _pred: Option<Reg>,
    ) -> Result<(), SimFault> {
        self.tma_unsupported("mbarrier.arrive.expect_tx")
    }
    pub(super) fn mbarrier_wait(&mut self, _bar: &MBarrier, _parity: Reg) -> Result<(), SimFault> {
        self.tma_unsupported("mbarrier.try_wait")
    }
    pub(super) fn mbarrier_inval(&mut self, _bar: &MBarrier, _pred: Option<Reg>) -> Result<(), SimFault> {
        self.tma_unsupported("mbarrier.inval")
    }
    pub(super) fn tma_load(
        &mut self,
        _map: u32,
        _alloc: u32,
        _dst: Reg,
        _coords: [Reg; 2],
        _bar: &MBarrier,
        _pred: Option<Reg>,
    ) -> Result<(), SimFault> {
        self.tma_unsupported("cp.async.bulk.tensor")
    }
}
