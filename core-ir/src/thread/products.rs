//! Both halves of a 32-bit product from one multiplication: the pairs of `Set`s in a
//! statement list that take `umulhi(a, b)` and `a * b` of the same 32-bit registers
//! (Philox's round function takes both halves of two products, `builder/random.rs`). A
//! backend may compute the first of a pair as one 64-bit product whose halves both `Set`s
//! copy (PTX's `mul.wide.u32`, one `IMAD.WIDE.U32` where `mul.hi` and `mul.lo` are two
//! instructions); the low half of the unsigned 64-bit product is the 32-bit product of
//! either signedness. An analysis only: the statements stay as they are.
//!
//! Only pairs whose operands cannot change between them are taken: the two `Set`s in one
//! statement list with nothing but `Set`s and comments between them, none of which (the
//! first `Set` included) writes `a` or `b`.

use super::{Expr, Reg, Stmt, ThreadKernel};
use crate::ir::BinaryOp;

/// What a statement of a list does in a product pair ([`product_pairs`]); `high`: whether
/// the statement takes the product's high half (`umulhi`) or its low one (`*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProductRole {
    /// The pair's first statement: it computes the whole product (slot `slot`) of `a` and
    /// `b`, and copies its half.
    First {
        /// The pair's number in the list: 0 for the first pair found, then 1, and so on.
        slot: usize,
        /// The product's first operand, a 32-bit integer register.
        a: Reg,
        /// Its second operand, a 32-bit integer register.
        b: Reg,
        /// Whether this statement takes the high half (`umulhi`) rather than the low (`*`).
        high: bool,
    },
    /// The pair's second: it copies its half of slot `slot`'s product.
    Second {
        /// The number of the pair, as its [`ProductRole::First`]'s.
        slot: usize,
        /// Whether this statement takes the high half (`umulhi`) rather than the low (`*`).
        high: bool,
    },
}

/// The products of 32-bit `a` and `b` that statement `s` takes, if any: `(a, b, high, dst)`.
fn product(k: &ThreadKernel, s: &Stmt) -> Option<(Reg, Reg, bool, Reg)> {
    let Stmt::Set {
        dst,
        expr: Expr::Binary(op @ (BinaryOp::UMulHi | BinaryOp::Mul), a, b),
    } = s
    else {
        return None;
    };
    let t = k.reg_type(*dst);
    (t.is_int() && t.bits() == 32).then_some((*a, *b, *op == BinaryOp::UMulHi, *dst))
}

/// The product pairs of statement list `list` of `k` (module comment): each statement's
/// part in one, if any. A list without `umulhi` has none, and is passed over at once (the
/// backends ask this of every list, index arithmetic's multiplies included).
pub fn product_pairs(k: &ThreadKernel, list: &[Stmt]) -> Vec<Option<ProductRole>> {
    let mut roles = vec![None; list.len()];
    let high_halves = |s: &Stmt| {
        matches!(
            s,
            Stmt::Set {
                expr: Expr::Binary(BinaryOp::UMulHi, ..),
                ..
            }
        )
    };
    if !list.iter().any(high_halves) {
        return roles;
    }
    let mut products = 0;
    for (i, s) in list.iter().enumerate() {
        let Some((a, b, high, dst)) = product(k, s) else {
            continue;
        };
        if roles[i].is_some() || dst == a || dst == b {
            continue;
        }
        // The other half, before anything writes `a` or `b` or leaves straight-line `Set`s.
        for (j, t) in list.iter().enumerate().skip(i + 1) {
            match t {
                Stmt::Comment(_) => continue,
                Stmt::Set { dst: d, .. } => {
                    if let Some((a2, b2, high2, _)) = product(k, t) {
                        let same = (a2, b2) == (a, b) || (a2, b2) == (b, a);
                        if same && high2 != high && roles[j].is_none() {
                            roles[i] = Some(ProductRole::First {
                                slot: products,
                                a,
                                b,
                                high,
                            });
                            roles[j] = Some(ProductRole::Second {
                                slot: products,
                                high: high2,
                            });
                            products += 1;
                            break;
                        }
                    }
                    if *d == a || *d == b {
                        break;
                    }
                }
                _ => break,
            }
        }
    }
    roles
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::ThreadKernelBuilder;
    use crate::types::ScalarType::{I64, U32};

    /// The roles `product_pairs` gives the kernel body `f` builds, from `(a, b)` of 32-bit registers.
    fn roles(f: impl FnOnce(&mut ThreadKernelBuilder, Reg, Reg)) -> Vec<Option<ProductRole>> {
        let mut k = ThreadKernelBuilder::new("products", 1, 32);
        let a = k.int(U32, 0x1234_5678);
        let b = k.int(U32, 0xD251_1F53);
        f(&mut k, a, b);
        let k = k.finish_unverified();
        product_pairs(&k, &k.body)[2..].to_vec()
    }

    #[test]
    fn high_and_low_of_the_same_operands_pair_up() {
        let r = roles(|k, a, b| {
            k.bin(BinaryOp::UMulHi, a, b);
            k.bin(BinaryOp::Add, a, b);
            k.bin(BinaryOp::Mul, b, a);
        });
        assert!(
            matches!(r[..], [Some(ProductRole::First { slot: 0, a, b, high: true }), None, Some(ProductRole::Second { slot: 0, high: false })] if a != b)
        );
        // The low half first works as well.
        let r = roles(|k, a, b| {
            k.bin(BinaryOp::Mul, a, b);
            k.bin(BinaryOp::UMulHi, a, b);
        });
        assert!(matches!(
            r[..],
            [
                Some(ProductRole::First {
                    slot: 0,
                    high: false,
                    ..
                }),
                Some(ProductRole::Second { slot: 0, high: true })
            ]
        ));
    }

    #[test]
    fn an_operand_written_between_them_keeps_them_apart() {
        let r = roles(|k, a, b| {
            k.bin(BinaryOp::UMulHi, a, b);
            k.assign(a, Expr::Binary(BinaryOp::Add, a, b));
            k.bin(BinaryOp::Mul, a, b);
        });
        assert_eq!(r, [None, None, None]);
        // The high half written into an operand: the low half would read the new value.
        let r = roles(|k, a, b| {
            k.assign(a, Expr::Binary(BinaryOp::UMulHi, a, b));
            k.bin(BinaryOp::Mul, a, b);
        });
        assert_eq!(r, [None, None]);
    }

    #[test]
    fn other_statements_and_other_widths_keep_them_apart() {
        let r = roles(|k, a, b| {
            k.bin(BinaryOp::UMulHi, a, b);
            let c = k.boolean(true);
            k.if_(c, |_| {}, |_| {});
            k.bin(BinaryOp::Mul, a, b);
        });
        assert_eq!(r, [None, None, None, None]);
        let mut k = ThreadKernelBuilder::new("products", 1, 32);
        let a = k.int(I64, 3);
        let b = k.int(I64, 5);
        k.bin(BinaryOp::UMulHi, a, b);
        k.bin(BinaryOp::Mul, a, b);
        let k = k.finish_unverified();
        assert!(product_pairs(&k, &k.body).iter().all(Option::is_none));
    }
}
