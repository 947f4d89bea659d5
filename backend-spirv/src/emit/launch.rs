//! The launch values (thread and program ids, grid size) and the scalar parameters in use,
//! read once at the top of the entry point as named expressions.

use super::*;

impl Cx<'_> {
    pub(super) fn preamble(&mut self, scan: &Scan) {
        if scan.thread_id {
            let id = match self.subgroup {
                // Lane numbers must agree with the subgroup's: see the crate docs.
                Some((sg, lane)) => {
                    let ws = self.u32c(self.k.warp_size);
                    let base = self.bin(Bo::Multiply, sg, ws);
                    self.bin(Bo::Add, base, lane)
                }
                None => self.local_index,
            };
            let id = self.as_(id, ScalarKind::Sint, None);
            self.f.named_expressions.insert(id, "thread_id".into());
            self.thread_id = Some(id);
        }
        for a in 0..3 {
            if scan.program_id[a] {
                let w = self.index(self.workgroup_id, a as u32);
                let offp = self.index(self.launch, 1);
                let offp = self.index(offp, a as u32);
                let off = self.load(offp);
                let sum = self.bin(Bo::Add, w, off);
                let id = self.as_(sum, ScalarKind::Sint, None);
                self.f.named_expressions.insert(id, format!("program_id_{a}"));
                self.program_id[a] = Some(id);
            }
            if scan.num_programs[a] {
                let p = self.index(self.launch, 0);
                let p = self.index(p, a as u32);
                let n = self.load(p);
                let n = self.as_(n, ScalarKind::Sint, None);
                self.f.named_expressions.insert(n, format!("num_programs_{a}"));
                self.num_programs[a] = Some(n);
            }
        }
        for (i, used) in scan.params_used.iter().enumerate() {
            let ThreadParam::Scalar { name, ty } = &self.k.params[i] else {
                continue;
            };
            if !used {
                continue;
            }
            let p = self.index(self.launch, self.member[i]);
            let mut v = self.load(p);
            if *ty == ScalarType::Bool {
                let z = self.u32c(0);
                v = self.bin(Bo::NotEqual, v, z);
            }
            self.f
                .named_expressions
                .insert(v, format!("param_{}", super::sanitize(name)));
            self.param_value[i] = Some(v);
        }
    }
}
