//! Cooperative matrices (`Stmt::CoopLoad`, `CoopStore`, `CoopMulAdd`, `CoopMul`, `CoopZero`) as naga's
//! (`TypeInner::CooperativeMatrix`, `Expression::CooperativeLoad`,
//! `CooperativeMultiplyAdd`, `Statement::CooperativeStore`), which the SPIR-V writer turns
//! into `SPV_KHR_cooperative_matrix` instructions of subgroup scope. Each matrix of the
//! kernel is a function variable `c{index}` of its type; its loads and stores address a
//! workgroup array element (the matrix's first) with a stride in elements.

use super::*;
use naga::{CooperativeData, CooperativeRole, CooperativeSize};
use rutile_ir::thread::{CoopReg, CoopRole};

fn size(n: u32) -> CooperativeSize {
    match n {
        8 => CooperativeSize::Eight,
        // The scan lets through 8 and 16 only.
        _ => CooperativeSize::Sixteen,
    }
}

fn role(r: CoopRole) -> CooperativeRole {
    match r {
        CoopRole::A => CooperativeRole::A,
        CoopRole::B => CooperativeRole::B,
        CoopRole::Acc => CooperativeRole::C,
    }
}

impl Cx<'_> {
    fn coop_ty(&mut self, c: CoopReg) -> Handle<Type> {
        let m = self.k.coop[c as usize];
        self.ty(TypeInner::CooperativeMatrix {
            columns: size(m.cols),
            rows: size(m.rows),
            scalar: naga_scalar(m.elem),
            role: role(m.role),
        })
    }

    fn coop_ptr(&mut self, c: CoopReg) -> H {
        if let Some(p) = self.coop[c as usize] {
            return p;
        }
        let ty = self.coop_ty(c);
        let var = self.f.local_variables.append(
            LocalVariable {
                name: Some(format!("c{c}")),
                ty,
                init: None,
            },
            SPAN,
        );
        let p = self.e(Expression::LocalVariable(var));
        self.coop[c as usize] = Some(p);
        p
    }

    fn coop_data(&mut self, alloc: u32, index: Reg, stride: u32, row_major: bool) -> CooperativeData {
        let (base, first) = self.shared[alloc as usize];
        // (Where the buffer starts its array, the index moved past the buffers before it.)
        let i = if first > 0 {
            let i = self.index_u32(index);
            let first = self.u32c(first);
            self.bin(naga::BinaryOperator::Add, i, first)
        } else {
            self.read(index)
        };
        let pointer = self.e(Expression::Access { base, index: i });
        let stride = self.u32c(stride);
        CooperativeData {
            pointer,
            stride,
            row_major,
        }
    }

    pub(super) fn coop_stmt(&mut self, s: &Stmt) {
        if self.coop_load_fences && matches!(s, Stmt::CoopLoad { .. }) {
            // Workgroup memory in the semantics: Vulkan wants a storage class beside the
            // acquire-release, and it is the memory the load reads.
            self.stmt(Statement::ControlBarrier(
                naga::Barrier::SUB_GROUP | naga::Barrier::WORK_GROUP,
            ));
        }
        match *s {
            Stmt::CoopLoad {
                dst,
                alloc,
                index,
                stride,
                row_major,
            } => {
                let m = self.k.coop[dst as usize];
                let data = self.coop_data(alloc, index, stride, row_major);
                let v = self.e(Expression::CooperativeLoad {
                    columns: size(m.cols),
                    rows: size(m.rows),
                    role: role(m.role),
                    data,
                });
                let pointer = self.coop_ptr(dst);
                self.stmt(Statement::Store { pointer, value: v });
            }
            Stmt::CoopStore {
                src,
                alloc,
                index,
                stride,
                row_major,
            } => {
                let p = self.coop_ptr(src);
                let target = self.load(p);
                let data = self.coop_data(alloc, index, stride, row_major);
                self.stmt(Statement::CooperativeStore { target, data });
            }
            Stmt::CoopMulAdd { d, a, b, c } => {
                let [pa, pb, pc] = [self.coop_ptr(a), self.coop_ptr(b), self.coop_ptr(c)];
                let (a, b, c2) = (self.load(pa), self.load(pb), self.load(pc));
                let v = self.e(Expression::CooperativeMultiplyAdd { a, b, c: c2 });
                let pointer = self.coop_ptr(d);
                self.stmt(Statement::Store { pointer, value: v });
            }
            Stmt::CoopMul { d, a, b } => {
                // naga's IR has no element-wise product of cooperative matrices (its `*` of
                // two is the linear-algebraic one, which it cannot write): the module holds
                // a subtraction, which `hints::coop_products` turns into `OpFMul` in the
                // words (`SpirvKernel::coop_products`).
                let [pa, pb] = [self.coop_ptr(a), self.coop_ptr(b)];
                let (left, right) = (self.load(pa), self.load(pb));
                let v = self.e(Expression::Binary {
                    op: naga::BinaryOperator::Subtract,
                    left,
                    right,
                });
                let pointer = self.coop_ptr(d);
                self.stmt(Statement::Store { pointer, value: v });
            }
            Stmt::CoopZero { dst } => {
                let ty = self.coop_ty(dst);
                let v = self.e(Expression::ZeroValue(ty));
                let pointer = self.coop_ptr(dst);
                self.stmt(Statement::Store { pointer, value: v });
            }
            _ => unreachable!("not a cooperative-matrix statement"),
        }
    }
}
