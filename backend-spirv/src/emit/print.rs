//! `device_print` on Vulkan: each line the kernel prints is a record in the print buffer
//! (the crate's ABI, "Prints"), which the runtime reads back after the launch and prints as
//! the interpreter would. A thread reserves its record's words with one atomic add on the
//! buffer's word 0 and writes them only where they fit; the runtime says how many did not.

use super::*;
use crate::PrintSite;

impl Cx<'_> {
    pub(super) fn print(
        &mut self,
        prefix: &str,
        coords: &[Reg],
        values: &[Reg],
        pred: Option<Reg>,
        program: Option<[Reg; 3]>,
    ) -> R<()> {
        let Some(buf) = self.print else {
            return Err(invalid(self.k, "a print without a print buffer".into()));
        };
        let site = PrintSite {
            prefix: prefix.to_string(),
            coords: coords.len(),
            values: values.iter().map(|&v| self.k.reg_type(v)).collect(),
        };
        let index = self.prints.len() as u32;
        let record = site.record_words() as u32;
        self.prints.push(site);
        self.predicated(pred, |cx| {
            let mut words = vec![cx.u32c(index)];
            let ids = cx.program_id;
            for (a, id) in ids.into_iter().enumerate() {
                let pid = match program {
                    Some(p) => cx.read(p[a]),
                    None => id.ok_or_else(|| invalid(cx.k, "a print without program ids".into()))?,
                };
                words.push(cx.as_(pid, ScalarKind::Uint, None));
            }
            for &c in coords {
                let v = cx.read(c);
                words.push(cx.as_(v, ScalarKind::Uint, None));
            }
            for &v in values {
                cx.value_words(v, &mut words);
            }
            // Reserve the record's words: `base` is where it starts after word 0.
            let counter = cx.e(Expression::AccessIndex { base: buf, index: 0 });
            let len = cx.u32c(record);
            let ty = cx.scalar_ty(ScalarType::U32);
            let base = cx.result(Expression::AtomicResult { ty, comparison: false });
            cx.stmt(Statement::Atomic {
                pointer: counter,
                fun: AtomicFunction::Add,
                value: len,
                result: Some(base),
            });
            // It fits where `base + record <= length - 1` (the counter may have passed the
            // buffer's end, and may wrap: `end > base` too).
            let length = cx.e(Expression::ArrayLength(buf));
            let one = cx.u32c(1);
            let room = cx.bin(Bo::Subtract, length, one);
            let end = cx.bin(Bo::Add, base, len);
            let within = cx.bin(Bo::LessEqual, end, room);
            let no_wrap = cx.bin(Bo::Greater, end, base);
            let fits = cx.bin(Bo::LogicalAnd, within, no_wrap);
            let accept = cx.nested(|cx| {
                let start = cx.bin(Bo::Add, base, one);
                for (w, &word) in words.iter().enumerate() {
                    let offset = cx.u32c(w as u32);
                    let at = cx.bin(Bo::Add, start, offset);
                    let pointer = cx.e(Expression::Access { base: buf, index: at });
                    cx.stmt(Statement::Store { pointer, value: word });
                }
                Ok(())
            })?;
            cx.stmt(Statement::If {
                condition: fits,
                accept,
                reject: Block::new(),
            });
            Ok(())
        })
    }

    /// The record's words of register `v` (`PrintSite::values` says how they read).
    fn value_words(&mut self, v: Reg, words: &mut Vec<H>) {
        let t = self.k.reg_type(v);
        let x = self.read(v);
        match t {
            ScalarType::Bool => {
                let (one, zero) = (self.u32c(1), self.u32c(0));
                words.push(self.select(x, one, zero));
            }
            ScalarType::U32 => words.push(x),
            ScalarType::I32 | ScalarType::F32 => words.push(self.as_(x, ScalarKind::Uint, None)),
            ScalarType::I8 | ScalarType::I16 => {
                let wide = self.as_(x, ScalarKind::Sint, Some(4));
                words.push(self.as_(wide, ScalarKind::Uint, None));
            }
            ScalarType::U8 | ScalarType::U16 => words.push(self.as_(x, ScalarKind::Uint, Some(4))),
            ScalarType::F16
            | ScalarType::BF16
            | ScalarType::F8E4M3
            | ScalarType::F8E5M2
            | ScalarType::F8E4M3B15
            | ScalarType::F8E4M3Fnuz
            | ScalarType::F8E5M2Fnuz => {
                let wide = self.as_(x, ScalarKind::Float, Some(4));
                words.push(self.as_(wide, ScalarKind::Uint, None));
            }
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => {
                let bits = match t {
                    ScalarType::U64 => x,
                    _ => self.as_(x, ScalarKind::Uint, None),
                };
                let low = self.as_(bits, ScalarKind::Uint, Some(4));
                let shift = self.u32c(32);
                let high = self.bin(Bo::ShiftRight, bits, shift);
                let high = self.as_(high, ScalarKind::Uint, Some(4));
                words.extend([low, high]);
            }
        }
    }
}
