//! Cases of the Philox random ops: each offset type against the interpreter, with a 64-bit
//! and a negative 32-bit seed. Integer streams and `rand` are bit-exact everywhere; `randn`
//! goes through the device's `log`, `sin` and `cos`.

use super::*;

type RandomFn = for<'b> fn(&'b KernelBuilder, Value<'b>) -> Value<'b>;

pub(super) fn random_cases() -> Vec<Case> {
    let ops: [(&str, ScalarType, RandomFn); 4] = [
        // All four words, so that each is compared.
        ("randint4x(xor)", U32, |k, off| {
            let r = k.randint4x(0x1234_5678_9abc_def0i64, off);
            r[0] ^ r[1] ^ r[2] ^ r[3]
        }),
        ("randint", U32, |k, off| k.randint(-123_456, off)),
        ("rand", F32, |k, off| k.rand(0x0123_4567_89ab_cdefi64, off)),
        ("randn", F32, |k, off| k.randn(2024, off)),
    ];
    let mut cases = Vec::new();
    for (op, out, f) in ops {
        for t in DTYPES {
            let rule = if op == "randn" {
                Rule::Float { op, arg: 0 }
            } else {
                Rule::Exact
            };
            let mut cs = elementwise_cases(op, &[(t, Domain::General)], out, rule, move |k, x| f(k, x[0]));
            for c in &mut cs {
                c.dtype = t;
            }
            cases.extend(cs);
        }
    }
    cases
}
