//! libdevice's `byte_perm` (CUDA's `__byte_perm`): four bytes picked from the eight of two
//! 32-bit integers, one op ([`crate::ir::Op::BytePerm`]): PTX's `prmt` where the target
//! has it, shifts and masks elsewhere (`lower::byte_perm`; Vulkan has no such instruction).

use super::{KernelBuilder, Value};
use crate::ir::{Op, SourceLoc};
use crate::types::ScalarType::{self, I32, U32};
use crate::types::Shape;

impl KernelBuilder {
    /// The bytes of `x` and `y` picked by `selector`, as `libdevice.byte_perm` and CUDA's
    /// `__byte_perm`: of the eight bytes `x` (bytes 0 to 3, lowest first) and `y` (4 to 7),
    /// byte `n` of the result is byte `(selector >> 4n) & 7` (the low three bits of each of
    /// the selector's four low nibbles count). `x` and `y` are 32-bit integers of one type
    /// (`i32` or `u32`), `selector` a 32-bit integer; the three broadcast together and the
    /// result has `x`'s type: `byte_perm(x, y, 0x3210)` is `x`, `0x7654` is `y`, `0x0123`
    /// reverses `x`'s bytes.
    #[track_caller]
    pub fn byte_perm<'b>(&'b self, x: Value<'b>, y: Value<'b>, selector: Value<'b>) -> Value<'b> {
        let loc = SourceLoc::caller();
        let op = "byte_perm";
        let (x, y, s) = (
            self.adopt(op, x, loc),
            self.adopt(op, y, loc),
            self.adopt(op, selector, loc),
        );
        if [x, y, s].iter().any(|v| self.is_poisoned(v.id)) {
            return self.poison(x.ty());
        }
        let word = |t: Option<ScalarType>| matches!(t, Some(I32 | U32));
        if !word(x.dtype()) || x.dtype() != y.dtype() || !word(s.dtype()) {
            let message = format!(
                "takes two 32-bit integers of one type and a 32-bit selector, got {}, {} and {}",
                x.ty(),
                y.ty(),
                s.ty()
            );
            return self.fail(op, loc, message, x.ty());
        }
        let shapes = [x, y, s].map(|v| v.ty().shape);
        let Some(shape) = Shape::broadcast(shapes[0], shapes[1]).and_then(|b| Shape::broadcast(b, shapes[2])) else {
            let message = format!(
                "shapes {}, {} and {} cannot be broadcast together",
                shapes[0], shapes[1], shapes[2]
            );
            return self.fail(op, loc, message, x.ty());
        };
        let t = x.dtype().expect("an integer");
        let [x, y, s] = [x, y, s.bitcast(t)].map(|v| self.broadcast_to(op, v, shape, loc));
        self.emit1(
            Op::BytePerm {
                x: x.id,
                y: y.id,
                selector: s.id,
            },
            None,
            loc,
        )
    }
}

impl<'b> Value<'b> {
    /// The bytes of `self` and `y` picked by `selector`; see [`KernelBuilder::byte_perm`].
    #[track_caller]
    pub fn byte_perm(self, y: Value<'b>, selector: Value<'b>) -> Value<'b> {
        self.builder.byte_perm(self, y, selector)
    }
}
