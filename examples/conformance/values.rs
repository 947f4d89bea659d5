//! Host values: one element of any type, its encoding, and the random generator.

use super::*;

/// One element, decoded: floats widened to f64 (exactly), integers to i128.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum V {
    F(f64),
    I(i128),
}

impl V {
    pub(crate) fn f(self) -> f64 {
        match self {
            V::F(x) => x,
            V::I(i) => i as f64,
        }
    }
    pub(crate) fn i(self) -> i128 {
        match self {
            V::F(x) => x as i128,
            V::I(i) => i,
        }
    }
    pub(crate) fn is_nan(self) -> bool {
        matches!(self, V::F(x) if x.is_nan())
    }
}

impl std::fmt::Display for V {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            V::F(x) if x.is_nan() => write!(f, "NaN"),
            V::F(x) => write!(f, "{x:e} ({:#018x})", x.to_bits()),
            V::I(i) => write!(f, "{i}"),
        }
    }
}

pub(super) fn int_range(t: ScalarType) -> (i128, i128) {
    let bits = t.bits();
    if t.is_unsigned_int() {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    }
}

/// Rounds `v` to a value of type `t` (floats round to nearest, integers wrap).
pub(super) fn quantize(t: ScalarType, v: V) -> V {
    decode(t, &encode(t, &[v]))[0]
}

pub(super) fn encode(t: ScalarType, vals: &[V]) -> Vec<u8> {
    let mut out = Vec::with_capacity(vals.len() * t.size_bytes());
    for &v in vals {
        match t {
            F16 => out.extend(half::f16::from_f64(v.f()).to_le_bytes()),
            BF16 => out.extend(half::bf16::from_f64(v.f()).to_le_bytes()),
            _ if t.is_fp8() => out.push(rutile::ir::fp8::format_of(t).expect("an fp8 type").encode(v.f())),
            F32 => out.extend((v.f() as f32).to_le_bytes()),
            F64 => out.extend(v.f().to_le_bytes()),
            _ => {
                let i = v.i();
                out.extend(&i.to_le_bytes()[..t.size_bytes()]);
            }
        }
    }
    out
}

pub(super) fn decode(t: ScalarType, bytes: &[u8]) -> Vec<V> {
    bytes
        .chunks_exact(t.size_bytes())
        .map(|c| match t {
            F16 => V::F(half::f16::from_le_bytes([c[0], c[1]]).to_f64()),
            BF16 => V::F(half::bf16::from_le_bytes([c[0], c[1]]).to_f64()),
            _ if t.is_fp8() => V::F(rutile::ir::fp8::format_of(t).expect("an fp8 type").decode(c[0])),
            F32 => V::F(f32::from_le_bytes(c.try_into().unwrap()) as f64),
            F64 => V::F(f64::from_le_bytes(c.try_into().unwrap())),
            _ => {
                let mut b = [0u8; 16];
                b[..c.len()].copy_from_slice(c);
                let fill = if t.is_signed_int() && c[c.len() - 1] & 0x80 != 0 {
                    0xff
                } else {
                    0
                };
                b[c.len()..].fill(fill);
                V::I(i128::from_le_bytes(b))
            }
        })
        .collect()
}
