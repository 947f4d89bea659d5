//! Integer polynomials over the values of a kernel, shared by the analyses that reason about
//! index arithmetic: `Σ factor · Π symbols · atom`, where a symbol is fixed over the region
//! analysed (a launch's arguments; a loop's invariant scalars) and an atom ranges over it
//! (a program id, an element's index). A term multiplies at most one atom, so the forms stay
//! affine in what varies: what the extent check evaluates per launch and the TMA box proof
//! splits into rows and columns.

/// `factor · Π symbols · atom`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Term<S, A> {
    pub factor: i128,
    /// Sorted, with repeats for powers.
    pub symbols: Vec<S>,
    pub atom: Option<A>,
}

/// The most symbols one term may multiply: index arithmetic is `row * stride + col`, not
/// long products, and a bound keeps evaluations short.
pub(crate) const MAX_SYMBOLS: usize = 4;

/// A sum of terms, sorted by (symbols, atom), each (symbols, atom) once, no zero factor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Poly<S, A> {
    pub terms: Vec<Term<S, A>>,
}

impl<S, A> Default for Poly<S, A> {
    fn default() -> Self {
        Poly { terms: Vec::new() }
    }
}

impl<S: Copy + Ord, A: Copy + Ord> Poly<S, A> {
    pub fn constant(c: i128) -> Self {
        Self::from_terms(vec![Term {
            factor: c,
            symbols: vec![],
            atom: None,
        }])
        .unwrap_or_default()
    }
    pub fn symbol(s: S) -> Self {
        Poly {
            terms: vec![Term {
                factor: 1,
                symbols: vec![s],
                atom: None,
            }],
        }
    }
    pub fn atom(a: A) -> Self {
        Poly {
            terms: vec![Term {
                factor: 1,
                symbols: vec![],
                atom: Some(a),
            }],
        }
    }

    /// Sorts and merges terms; `None` when a factor overflows.
    pub fn from_terms(mut terms: Vec<Term<S, A>>) -> Option<Self> {
        for t in &mut terms {
            t.symbols.sort_unstable();
        }
        terms.sort_by(|a, b| (&a.symbols, a.atom).cmp(&(&b.symbols, b.atom)));
        let mut merged: Vec<Term<S, A>> = Vec::with_capacity(terms.len());
        for t in terms {
            match merged.last_mut() {
                Some(last) if last.symbols == t.symbols && last.atom == t.atom => {
                    last.factor = last.factor.checked_add(t.factor)?;
                }
                _ => merged.push(t),
            }
        }
        merged.retain(|t| t.factor != 0);
        Some(Poly { terms: merged })
    }

    pub fn add(&self, other: &Self) -> Option<Self> {
        Self::from_terms(self.terms.iter().chain(&other.terms).cloned().collect())
    }

    pub fn scale(&self, c: i128) -> Option<Self> {
        let mut terms = self.terms.clone();
        for t in &mut terms {
            t.factor = t.factor.checked_mul(c)?;
        }
        Self::from_terms(terms)
    }

    pub fn sub(&self, other: &Self) -> Option<Self> {
        self.add(&other.scale(-1)?)
    }

    /// The product; `None` where a term would multiply two atoms or more than
    /// [`MAX_SYMBOLS`] symbols, or a factor overflows.
    pub fn mul(&self, other: &Self) -> Option<Self> {
        let mut terms = Vec::with_capacity(self.terms.len() * other.terms.len());
        for a in &self.terms {
            for b in &other.terms {
                if a.atom.is_some() && b.atom.is_some() || a.symbols.len() + b.symbols.len() > MAX_SYMBOLS {
                    return None;
                }
                terms.push(Term {
                    factor: a.factor.checked_mul(b.factor)?,
                    symbols: a.symbols.iter().chain(&b.symbols).copied().collect(),
                    atom: a.atom.or(b.atom),
                });
            }
        }
        Self::from_terms(terms)
    }

    /// The same polynomial with each atom renamed `f(atom)`; a term whose atom maps to
    /// `None` is dropped (an index that is always 0).
    pub fn map_atoms(&self, f: impl Fn(A) -> Option<A>) -> Self {
        let terms = self
            .terms
            .iter()
            .filter_map(|t| match t.atom {
                Some(a) => f(a).map(|a| Term {
                    atom: Some(a),
                    ..t.clone()
                }),
                None => Some(t.clone()),
            })
            .collect();
        Self::from_terms(terms).unwrap_or_default()
    }

    pub fn has_atoms(&self) -> bool {
        self.terms.iter().any(|t| t.atom.is_some())
    }

    /// The constant, if that is all it is.
    pub fn as_constant(&self) -> Option<i128> {
        match self.terms.as_slice() {
            [] => Some(0),
            [t] if t.symbols.is_empty() && t.atom.is_none() => Some(t.factor),
            _ => None,
        }
    }
}
