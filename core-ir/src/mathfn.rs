//! Constants of the math functions the backends write out themselves, kept here so that
//! every backend computes them the same way.

/// `tanh(x) / x = Σ TANH_SERIES[i] · x^(2i)`: the Taylor series of `tanh`, whose terms
/// shrink by about `(2x/π)²` each. Below [`TANH_SERIES_BELOW`] the nine terms here leave
/// under 2^-27 relative error; above it `tanh` is computed as `1 - 2 / (e^(2|x|) + 1)`,
/// whose subtraction then loses at most one bit (tanh(0.55) ≈ 0.5).
pub const TANH_SERIES: [f64; 9] = [
    1.0,
    -1.0 / 3.0,
    2.0 / 15.0,
    -17.0 / 315.0,
    62.0 / 2835.0,
    -1382.0 / 155925.0,
    21844.0 / 6081075.0,
    -929569.0 / 638512875.0,
    6404582.0 / 10854718875.0,
];

/// Where `tanh` switches from [`TANH_SERIES`] to the exponential form.
pub const TANH_SERIES_BELOW: f64 = 0.55;
