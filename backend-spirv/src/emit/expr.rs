//! Arithmetic: the per-thread IR's expressions, unary and binary ops, comparisons, casts
//! and the math functions the backend writes out itself.

use super::*;

impl Cx<'_> {
    pub(super) fn expr(&mut self, ty: ScalarType, e: &Expr) -> R<H> {
        if held_in_f32(ty) {
            return self.held_expr(ty, e);
        }
        Ok(match e {
            Expr::Const(l) => match *l {
                Literal::Bool(b) => self.lit(naga::Literal::Bool(b)),
                Literal::Int(v) => self.int_lit(ty, v),
                Literal::Float(v) => self.float_lit(ty, v),
            },
            Expr::Param(i) => self.param_value[*i as usize].expect("scanned parameter"),
            Expr::Special(Special::ThreadId) => self.thread_id.expect("scanned thread id"),
            Expr::Special(Special::ProgramId(a)) => self.program_id[*a as usize % 3].expect("scanned program id"),
            Expr::Special(Special::NumPrograms(a)) => self.num_programs[*a as usize % 3].expect("scanned grid size"),
            Expr::Copy(a) => self.read(*a),
            Expr::Unary(op, a) => {
                let x = self.read(*a);
                let r = self.unary(*op, ty, x)?;
                match op {
                    UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not => self.narrow(ty, r),
                    _ => r,
                }
            }
            Expr::Binary(op, a, b) => {
                let x = self.read(*a);
                let y = self.read(*b);
                let r = self.binary(*op, ty, x, y)?;
                match op {
                    BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::DivFull
                    | BinaryOp::CeilDiv
                    | BinaryOp::Shl => self.narrow(ty, r),
                    _ => r,
                }
            }
            Expr::Compare(op, a, b) => {
                let t = self.k.reg_type(*a);
                let x = self.read(*a);
                let y = self.read(*b);
                self.compare(*op, t, x, y)
            }
            Expr::Select(c, a, b) => {
                let c = self.read(*c);
                let x = self.read(*a);
                let y = self.read(*b);
                self.select(c, x, y)
            }
            Expr::Fma(a, b, c) => {
                let x = self.read(*a);
                let y = self.read(*b);
                let z = self.read(*c);
                self.math(Mf::Fma, &[x, y, z])
            }
            Expr::Rounded(op, rounding, args) => self.rounded(*op, *rounding, ty, args)?,
            Expr::BytePerm(..) => {
                // SPIR-V has no byte permute: a kernel lowered for a Vulkan target
                // (`Target::vulkan`, whose `byte_perm` is off) has it in shifts instead.
                let detail = "a one-instruction byte_perm: lower with `Target::byte_perm` off".to_string();
                return Err(unsupported(self.k, "byte_perm", detail));
            }
            Expr::Cast(a) => {
                let src = self.k.reg_type(*a);
                let x = self.read(*a);
                self.cast(src, ty, x)
            }
            Expr::Bitcast(a) => {
                let src = self.k.reg_type(*a);
                let x = self.read(*a);
                if src == ty {
                    x
                } else if src.bits() == 16 && (src.is_float() || ty.is_float()) {
                    self.bitcast_16(src, ty, x)
                } else if src.is_fp8() {
                    self.bitcast_8(src, ty, x)
                } else {
                    let v = self.as_(x, naga_scalar(ty).kind, None);
                    self.narrow(ty, v)
                }
            }
            Expr::ShuffleXor { value, mask } => {
                let x = self.read(*value);
                let m = self.u32c(*mask);
                self.shuffle(ty, x, GatherMode::ShuffleXor(m))
            }
            Expr::ShuffleIdx { value, lane } => {
                let x = self.read(*value);
                let l = self.read(*lane);
                let l = self.as_(l, ScalarKind::Uint, None);
                self.shuffle(ty, x, GatherMode::Shuffle(l))
            }
        })
    }

    pub(super) fn shuffle(&mut self, ty: ScalarType, x: H, mode: GatherMode) -> H {
        if ty == ScalarType::Bool {
            // Subgroup gathers take numbers only.
            let one = self.u32c(1);
            let zero = self.u32c(0);
            let n = self.select(x, one, zero);
            let r = self.shuffle(ScalarType::U32, n, mode);
            let zero = self.u32c(0);
            return self.bin(Bo::NotEqual, r, zero);
        }
        let rty = self.scalar_ty(ty);
        let result = self.result(Expression::SubgroupOperationResult { ty: rty });
        self.stmt(Statement::SubgroupGather {
            mode,
            argument: x,
            result,
        });
        result
    }

    pub(super) fn unary(&mut self, op: UnaryOp, ty: ScalarType, x: H) -> R<H> {
        let float = ty.is_float();
        Ok(match op {
            UnaryOp::Neg if ty.is_unsigned_int() => {
                let z = self.zero(ty);
                self.bin(Bo::Subtract, z, x)
            }
            UnaryOp::Neg if ty != ScalarType::Bool => self.un(Uo::Negate, x),
            UnaryOp::Not if ty == ScalarType::Bool => self.un(Uo::LogicalNot, x),
            UnaryOp::Not if ty.is_int() => self.un(Uo::BitwiseNot, x),
            UnaryOp::Abs if ty.is_unsigned_int() => x,
            UnaryOp::Abs if ty != ScalarType::Bool => self.math(Mf::Abs, &[x]),
            UnaryOp::Exp if float => self.transcendental(Mf::Exp, ty, x),
            UnaryOp::Exp2 if float => self.transcendental(Mf::Exp2, ty, x),
            UnaryOp::Log if float => self.transcendental(Mf::Log, ty, x),
            UnaryOp::Log2 if float => self.transcendental(Mf::Log2, ty, x),
            UnaryOp::Sqrt if float => self.math(Mf::Sqrt, &[x]),
            UnaryOp::Rsqrt if float => self.math(Mf::InverseSqrt, &[x]),
            UnaryOp::Sin if float => self.transcendental(Mf::Sin, ty, x),
            UnaryOp::Cos if float => self.transcendental(Mf::Cos, ty, x),
            UnaryOp::Floor if float => self.math(Mf::Floor, &[x]),
            UnaryOp::Ceil if float => self.math(Mf::Ceil, &[x]),
            // f64's from `floor` (f64_rounding.rs: lavapipe's were wrong).
            UnaryOp::Trunc if ty == ScalarType::F64 => self.trunc_f64(x),
            UnaryOp::Rint if ty == ScalarType::F64 => self.rint_f64(x),
            UnaryOp::Trunc if float => self.math(Mf::Trunc, &[x]),
            // naga's `Round` is GLSL's `RoundEven` (WGSL's `round` ties to even).
            UnaryOp::Rint if float => self.math(Mf::Round, &[x]),
            UnaryOp::Erf if float => self.erf(ty, x),
            UnaryOp::Sigmoid if float => self.sigmoid(ty, x),
            UnaryOp::Tanh if float => self.tanh(ty, x),
            UnaryOp::Popc | UnaryOp::Clz | UnaryOp::Brev | UnaryOp::Ffs if ty.is_int() => self.bit_op(op, ty, x),
            _ => return Err(invalid(self.k, format!("{} of {ty}", op.name()))),
        })
    }

    /// `popc`, `clz`, `brev` or `ffs` of integer `x`. Vulkan counts, reverses and finds
    /// bits of 32-bit integers only, so the ops run on unsigned 32-bit words: an 8- or
    /// 16-bit integer's bits (held extended in 32, masked where the extension would count)
    /// and a 64-bit integer's two halves.
    fn bit_op(&mut self, op: UnaryOp, ty: ScalarType, x: H) -> H {
        let w = ty.bits();
        if w == 64 {
            let u = self.as_(x, ScalarKind::Uint, None);
            let lo = self.as_(u, ScalarKind::Uint, Some(4));
            let s = self.u32c(32);
            let up = self.bin(Bo::ShiftRight, u, s);
            let hi = self.as_(up, ScalarKind::Uint, Some(4));
            let word = |cx: &mut Self, v: H| cx.as_(v, ScalarKind::Uint, Some(8));
            let r = match op {
                UnaryOp::Popc => {
                    let (a, b) = (self.math(Mf::CountOneBits, &[lo]), self.math(Mf::CountOneBits, &[hi]));
                    let sum = self.bin(Bo::Add, a, b);
                    word(self, sum)
                }
                UnaryOp::Clz => {
                    let (a, b) = (
                        self.math(Mf::CountLeadingZeros, &[hi]),
                        self.math(Mf::CountLeadingZeros, &[lo]),
                    );
                    let c = self.u32c(32);
                    let low = self.bin(Bo::Add, b, c);
                    let z = self.u32c(0);
                    let hi_zero = self.bin(Bo::Equal, hi, z);
                    let r = self.select(hi_zero, low, a);
                    word(self, r)
                }
                UnaryOp::Brev => {
                    let (a, b) = (self.math(Mf::ReverseBits, &[lo]), self.math(Mf::ReverseBits, &[hi]));
                    let (a, b) = (word(self, a), word(self, b));
                    let s = self.u32c(32);
                    let up = self.bin(Bo::ShiftLeft, a, s);
                    self.bin(Bo::InclusiveOr, up, b)
                }
                _ => {
                    let (a, b) = (self.ffs32(lo), self.ffs32(hi));
                    let z = self.u32c(0);
                    let lo_set = self.bin(Bo::NotEqual, lo, z);
                    let z = self.u32c(0);
                    let hi_set = self.bin(Bo::NotEqual, b, z);
                    let c = self.u32c(32);
                    let high = self.bin(Bo::Add, b, c);
                    let z = self.u32c(0);
                    let high = self.select(hi_set, high, z);
                    let r = self.select(lo_set, a, high);
                    word(self, r)
                }
            };
            return match ty.is_signed_int() {
                true => self.as_(r, ScalarKind::Sint, None),
                false => r,
            };
        }
        let u = self.as_(x, ScalarKind::Uint, None);
        let masked = |cx: &mut Self| match w {
            32 => u,
            _ => {
                let m = cx.u32c((1u32 << w) - 1);
                cx.bin(Bo::And, u, m)
            }
        };
        let r = match op {
            UnaryOp::Popc => {
                let m = masked(self);
                self.math(Mf::CountOneBits, &[m])
            }
            UnaryOp::Clz => {
                let m = masked(self);
                let c = self.math(Mf::CountLeadingZeros, &[m]);
                let d = self.u32c(32 - w);
                self.bin(Bo::Subtract, c, d)
            }
            UnaryOp::Brev => {
                let r = self.math(Mf::ReverseBits, &[u]);
                let d = self.u32c(32 - w);
                self.bin(Bo::ShiftRight, r, d)
            }
            _ => self.ffs32(u),
        };
        let r = match ty.is_signed_int() {
            true => self.as_(r, ScalarKind::Sint, None),
            false => r,
        };
        self.narrow(ty, r)
    }

    /// The position of the lowest set bit of unsigned 32-bit `u`, from 1 (0 for 0): one more
    /// than `firstTrailingBit`, whose "none" is all ones.
    fn ffs32(&mut self, u: H) -> H {
        let t = self.math(Mf::FirstTrailingBit, &[u]);
        let one = self.u32c(1);
        self.bin(Bo::Add, t, one)
    }

    /// `exp`, `log`, `sin`, ...: GLSL.std.450 has them for 16- and 32-bit floats only, so
    /// `f64` goes through `f32`.
    pub(super) fn transcendental(&mut self, fun: Mf, ty: ScalarType, x: H) -> H {
        if ty != ScalarType::F64 {
            return self.math(fun, &[x]);
        }
        let x = self.as_f32(ty, x);
        let r = self.math(fun, &[x]);
        self.as_(r, ScalarKind::Float, Some(8))
    }

    pub(super) fn binary(&mut self, op: BinaryOp, ty: ScalarType, x: H, y: H) -> R<H> {
        if ty == ScalarType::Bool {
            return Ok(match op {
                BinaryOp::And | BinaryOp::Min => self.bin(Bo::LogicalAnd, x, y),
                BinaryOp::Or | BinaryOp::Max => self.bin(Bo::LogicalOr, x, y),
                BinaryOp::Xor => self.bin(Bo::NotEqual, x, y),
                _ => return Err(invalid(self.k, format!("{} of i1", op.name()))),
            });
        }
        if ty.is_float() {
            return Ok(match op {
                BinaryOp::Add => self.bin(Bo::Add, x, y),
                BinaryOp::Sub => self.bin(Bo::Subtract, x, y),
                BinaryOp::Mul => self.bin(Bo::Multiply, x, y),
                // Vulkan's OpFDiv is already within 2.5 ulp, not correctly rounded: there is
                // no faster division to ask for.
                BinaryOp::Div | BinaryOp::DivFull => self.bin(Bo::Divide, x, y),
                BinaryOp::Rem => self.fmod(ty, x, y)?,
                BinaryOp::Min => self.fminmax(true, ty, x, y),
                BinaryOp::Max => self.fminmax(false, ty, x, y),
                BinaryOp::Pow => self.pow(ty, x, y),
                _ => return Err(invalid(self.k, format!("{} of {ty}", op.name()))),
            });
        }
        Ok(match op {
            BinaryOp::Add => self.bin(Bo::Add, x, y),
            BinaryOp::Sub => self.bin(Bo::Subtract, x, y),
            BinaryOp::Mul => self.bin(Bo::Multiply, x, y),
            BinaryOp::Div => self.idiv(ty, x, y),
            // naga and WGSL define `x % 0` and `MIN % -1` as 0, as the IR does.
            BinaryOp::Rem => self.irem(ty, x, y),
            BinaryOp::CeilDiv => {
                let s = self.bin(Bo::Add, x, y);
                let one = self.int_lit(ty, 1);
                let s = self.bin(Bo::Subtract, s, one);
                let s = self.narrow(ty, s);
                self.idiv(ty, s, y)
            }
            BinaryOp::And => self.bin(Bo::And, x, y),
            BinaryOp::Or => self.bin(Bo::InclusiveOr, x, y),
            BinaryOp::Xor => self.bin(Bo::ExclusiveOr, x, y),
            BinaryOp::Shl | BinaryOp::Shr => self.shift(op == BinaryOp::Shl, ty, x, y),
            BinaryOp::Min => self.math(Mf::Min, &[x, y]),
            BinaryOp::Max => self.math(Mf::Max, &[x, y]),
            BinaryOp::UMulHi => self.umulhi(ty, x, y)?,
            BinaryOp::DivFull | BinaryOp::Pow => return Err(invalid(self.k, format!("{} of {ty}", op.name()))),
        })
    }

    /// An 8- or 16-bit integer result brought back to its representation: the value of its
    /// type, sign- (signed) or zero-extended (unsigned) to 32 bits. Other types pass.
    pub(super) fn narrow(&mut self, ty: ScalarType, x: H) -> H {
        if !is_narrow(ty) {
            return x;
        }
        let w = ty.bits();
        if ty.is_signed_int() {
            let s = self.u32c(32 - w);
            let up = self.bin(Bo::ShiftLeft, x, s);
            let s = self.u32c(32 - w);
            self.bin(Bo::ShiftRight, up, s)
        } else {
            let m = self.u32c((1u32 << w) - 1);
            self.bin(Bo::And, x, m)
        }
    }

    /// The value of an integer literal expression, as unsigned bits of its width.
    pub(super) fn int_literal(&self, h: H) -> Option<u64> {
        match self.f.expressions[h] {
            Expression::Literal(naga::Literal::I32(v)) => Some(v as u32 as u64),
            Expression::Literal(naga::Literal::U32(v)) => Some(v as u64),
            Expression::Literal(naga::Literal::I64(v)) => Some(v as u64),
            Expression::Literal(naga::Literal::U64(v)) => Some(v),
            _ => None,
        }
    }

    /// Integer remainder; by a literal zero (which naga rejects), 0.
    pub(super) fn irem(&mut self, ty: ScalarType, x: H, y: H) -> H {
        if self.int_literal(y) == Some(0) {
            return self.zero(ty);
        }
        self.bin(Bo::Modulo, x, y)
    }

    /// Integer division with `x / 0 = 0` (naga gives `x`) and `MIN / -1 = MIN`.
    pub(super) fn idiv(&mut self, ty: ScalarType, x: H, y: H) -> H {
        match self.int_literal(y) {
            Some(0) => return self.zero(ty),
            Some(_) => return self.bin(Bo::Divide, x, y),
            None => {}
        }
        let q = self.bin(Bo::Divide, x, y);
        let z = self.zero(ty);
        let by_zero = self.bin(Bo::Equal, y, z);
        let z = self.zero(ty);
        self.select(by_zero, z, q)
    }

    /// Shifts where an amount at or above the width gives 0 (or the sign fill).
    pub(super) fn shift(&mut self, left: bool, ty: ScalarType, x: H, amount: H) -> H {
        let width = ty.bits() as i64;
        if let Some(n) = self.int_literal(amount) {
            let sign_fill = !left && ty.is_signed_int();
            if n >= width as u64 && !sign_fill {
                return self.zero(ty);
            }
            let a = self.u32c(n.min(width as u64 - 1) as u32);
            return self.bin(if left { Bo::ShiftLeft } else { Bo::ShiftRight }, x, a);
        }
        let unsigned_ty = if ty.bits() == 64 {
            ScalarType::U64
        } else {
            ScalarType::U32
        };
        let a = if ty.is_signed_int() {
            self.as_(amount, ScalarKind::Uint, None)
        } else {
            amount
        };
        let w = self.int_lit(unsigned_ty, width);
        let too_far = self.bin(Bo::GreaterEqual, a, w);
        let mask = self.int_lit(unsigned_ty, width - 1);
        let mut a = self.bin(Bo::And, a, mask);
        if ty.bits() == 64 {
            a = self.as_(a, ScalarKind::Uint, Some(4));
        }
        if !left && ty.is_signed_int() {
            // Sign fill: shift by width - 1.
            let last = self.u32c(width as u32 - 1);
            let a = self.select(too_far, last, a);
            return self.bin(Bo::ShiftRight, x, a);
        }
        let shifted = self.bin(if left { Bo::ShiftLeft } else { Bo::ShiftRight }, x, a);
        let z = self.zero(ty);
        self.select(too_far, z, shifted)
    }

    /// `x` as `f32` (exactly for `f16`; NaN stays NaN and signs stay for `f64`).
    pub(super) fn as_f32(&mut self, ty: ScalarType, x: H) -> H {
        if ty == ScalarType::F32 {
            x
        } else {
            self.as_(x, ScalarKind::Float, Some(4))
        }
    }

    /// `f32` `r` as float type `ty` (one rounding; `bf16` and fp8 by `round_held`).
    pub(super) fn f32_as(&mut self, ty: ScalarType, r: H) -> H {
        match ty {
            ScalarType::F32 => r,
            _ if held_in_f32(ty) => self.round_held(ty, r),
            _ => self.as_(r, ScalarKind::Float, Some(ty.size_bytes() as u8)),
        }
    }

    /// Whether `x` is a NaN, from its bits (robust where the device assumes no NaNs).
    pub(super) fn is_nan(&mut self, ty: ScalarType, x: H) -> H {
        let x = self.as_f32(ty, x);
        let bits = self.as_(x, ScalarKind::Uint, None);
        let m = self.u32c(0x7fff_ffff);
        let mag = self.bin(Bo::And, bits, m);
        let inf = self.u32c(0x7f80_0000);
        self.bin(Bo::Greater, mag, inf)
    }

    /// Whether the sign bit of `x` is set.
    pub(super) fn sign_bit(&mut self, ty: ScalarType, x: H) -> H {
        let x = self.as_f32(ty, x);
        let bits = self.as_(x, ScalarKind::Sint, None);
        let z = self.lit(naga::Literal::I32(0));
        self.bin(Bo::Less, bits, z)
    }

    /// IEEE `minimum`/`maximum`: NaN if either is NaN; -0.0 below +0.0.
    pub(super) fn fminmax(&mut self, min: bool, ty: ScalarType, x: H, y: H) -> H {
        let strictly = self.bin(if min { Bo::Less } else { Bo::Greater }, x, y);
        let eq = self.bin(Bo::Equal, x, y);
        let neg = self.sign_bit(ty, x);
        let tie = if min { neg } else { self.un(Uo::LogicalNot, neg) };
        let tie = self.bin(Bo::LogicalAnd, eq, tie);
        let take_x = self.bin(Bo::LogicalOr, strictly, tie);
        let r = self.select(take_x, x, y);
        let nx = self.is_nan(ty, x);
        let ny = self.is_nan(ty, y);
        let nan = self.bin(Bo::LogicalOr, nx, ny);
        let sum = self.bin(Bo::Add, x, y);
        self.select(nan, sum, r)
    }

    pub(super) fn compare(&mut self, op: CmpOp, ty: ScalarType, x: H, y: H) -> H {
        if ty == ScalarType::Bool {
            return match op {
                CmpOp::Eq => self.bin(Bo::Equal, x, y),
                CmpOp::Ne => self.bin(Bo::NotEqual, x, y),
                // false < true.
                CmpOp::Lt | CmpOp::Le => {
                    let nx = self.un(Uo::LogicalNot, x);
                    self.bin(if op == CmpOp::Lt { Bo::LogicalAnd } else { Bo::LogicalOr }, nx, y)
                }
                CmpOp::Gt | CmpOp::Ge => {
                    let ny = self.un(Uo::LogicalNot, y);
                    self.bin(if op == CmpOp::Gt { Bo::LogicalAnd } else { Bo::LogicalOr }, x, ny)
                }
            };
        }
        match op {
            CmpOp::Eq => self.bin(Bo::Equal, x, y),
            // naga's float `!=` is ordered (false with a NaN); the IR's is not.
            CmpOp::Ne if ty.is_float() => {
                let eq = self.bin(Bo::Equal, x, y);
                self.un(Uo::LogicalNot, eq)
            }
            CmpOp::Ne => self.bin(Bo::NotEqual, x, y),
            CmpOp::Lt => self.bin(Bo::Less, x, y),
            CmpOp::Le => self.bin(Bo::LessEqual, x, y),
            CmpOp::Gt => self.bin(Bo::Greater, x, y),
            CmpOp::Ge => self.bin(Bo::GreaterEqual, x, y),
        }
    }

    pub(super) fn cast(&mut self, src: ScalarType, dst: ScalarType, x: H) -> H {
        if src == dst {
            return x;
        }
        if held_in_f32(dst) {
            return self.cast_to_held(src, dst, x);
        }
        // A bf16 or fp8 register is an f32 holding the value.
        let src = if held_in_f32(src) { ScalarType::F32 } else { src };
        if src == ScalarType::Bool {
            let one = if dst.is_float() {
                self.float_lit(dst, 1.0)
            } else {
                self.int_lit(dst, 1)
            };
            let zero = self.zero(dst);
            return self.select(x, one, zero);
        }
        if dst == ScalarType::Bool {
            let z = self.zero(src);
            if src.is_float() {
                // NaN is true.
                let eq = self.bin(Bo::Equal, x, z);
                return self.un(Uo::LogicalNot, eq);
            }
            return self.bin(Bo::NotEqual, x, z);
        }
        let s = naga_scalar(src);
        let d = naga_scalar(dst);
        if src.is_int() && dst.is_int() {
            // Width first, in the source's signedness (sign- or zero-extension), then the kind.
            let mut v = x;
            if s.width != d.width {
                v = self.as_(v, s.kind, Some(d.width));
            }
            if s.kind != d.kind {
                v = self.as_(v, d.kind, None);
            }
            return self.narrow(dst, v);
        }
        if src.is_float() && is_narrow(dst) {
            // Through the 32-bit type of the same signedness, then clamped.
            let wide = if dst.is_signed_int() {
                ScalarType::I32
            } else {
                ScalarType::U32
            };
            let v = self.float_to_int(src, wide, x);
            let bits = dst.bits();
            let (lo, hi) = if dst.is_signed_int() {
                (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
            } else {
                (0, (1i64 << bits) - 1)
            };
            let h = self.int_lit(wide, hi);
            let v = self.math(Mf::Min, &[v, h]);
            if dst.is_signed_int() {
                let l = self.int_lit(wide, lo);
                return self.math(Mf::Max, &[v, l]);
            }
            return v;
        }
        if src.is_float() && dst.is_int() {
            return self.float_to_int(src, dst, x);
        }
        self.as_(x, d.kind, Some(d.width))
    }

    /// Truncation toward zero, saturating at the integer type's bounds, NaN to 0.
    pub(super) fn float_to_int(&mut self, src: ScalarType, dst: ScalarType, x: H) -> H {
        let d = naga_scalar(dst);
        // naga clamps to the largest floats inside the range before converting.
        let conv = self.as_(x, d.kind, Some(d.width));
        let max_finite = match src {
            ScalarType::F16 => 65504.0,
            ScalarType::F32 => f32::MAX as f64,
            _ => f64::MAX,
        };
        let bits = dst.bits() as i32;
        let (hi, max_int, min_int) = if dst.is_signed_int() {
            (
                2f64.powi(bits - 1),
                if bits == 64 { i64::MAX } else { i32::MAX as i64 },
                if bits == 64 { i64::MIN } else { i32::MIN as i64 },
            )
        } else {
            (2f64.powi(bits), if bits == 64 { -1 } else { u32::MAX as i64 }, 0)
        };
        let over = if hi <= max_finite {
            let h = self.float_lit(src, hi);
            self.bin(Bo::GreaterEqual, x, h)
        } else {
            let m = self.float_lit(src, max_finite);
            self.bin(Bo::Greater, x, m)
        };
        let top = self.int_lit(dst, max_int);
        let mut r = self.select(over, top, conv);
        if dst.is_signed_int() && hi > max_finite {
            // The lowest integer is beyond the float's range: only -inf reaches it.
            let m = self.float_lit(src, -max_finite);
            let under = self.bin(Bo::Less, x, m);
            let bottom = self.int_lit(dst, min_int);
            r = self.select(under, bottom, r);
        }
        let nan = self.is_nan(src, x);
        let z = self.zero(dst);
        self.select(nan, z, r)
    }

    pub(super) fn horner(&mut self, coeffs: &[f32], t: H) -> H {
        let last = *coeffs.last().expect("the callers' coefficient tables are not empty");
        let mut acc = self.lit(naga::Literal::F32(last));
        for &c in coeffs.iter().rev().skip(1) {
            let c = self.lit(naga::Literal::F32(c));
            acc = self.math(Mf::Fma, &[acc, t, c]);
        }
        acc
    }

    /// `erf` (see [`crate::erf`]); other float types go through `f32`.
    pub(super) fn erf(&mut self, ty: ScalarType, x: H) -> H {
        let x = self.as_f32(ty, x);
        let ax = self.math(Mf::Abs, &[x]);
        let s = self.bin(Bo::Multiply, x, x);
        let p = self.horner(&erf::SMALL, s);
        let small = self.bin(Bo::Multiply, x, p);
        let four = self.lit(naga::Literal::F32(4.0));
        let xc = self.math(Mf::Min, &[ax, four]);
        let qm = self.horner(&erf::MID, xc);
        let qt = self.horner(&erf::TAIL, xc);
        let two = self.lit(naga::Literal::F32(2.0));
        let in_mid = self.bin(Bo::Less, xc, two);
        let q = self.select(in_mid, qm, qt);
        let sq = self.bin(Bo::Multiply, xc, xc);
        let nsq = self.un(Uo::Negate, sq);
        let e = self.math(Mf::Exp, &[nsq]);
        let ne = self.un(Uo::Negate, e);
        let one = self.lit(naga::Literal::F32(1.0));
        let tail = self.math(Mf::Fma, &[ne, q, one]);
        let zero = self.lit(naga::Literal::F32(0.0));
        let negative = self.bin(Bo::Less, x, zero);
        let ntail = self.un(Uo::Negate, tail);
        let big = self.select(negative, ntail, tail);
        let one = self.lit(naga::Literal::F32(1.0));
        let large = self.bin(Bo::GreaterEqual, ax, one);
        let r = self.select(large, big, small);
        self.f32_as(ty, r)
    }
}
