//! Kubernetes resource quantities (`500m`, `2Gi`, `1e3`, `4`), parsed exactly as
//! `k8s.io/apimachinery/pkg/api/resource.ParseQuantity` accepts them.
//!
//! Values are kept as integers in nano-units (`i128`), which is exact for every quantity Kubernetes
//! prints in canonical form; anything finer than `1n` is rounded away from zero, like Kubernetes'
//! own `ScaledValue`. [`parse_milli`] is `Quantity.MilliValue()` and [`value_ceil`] is
//! `Quantity.Value()`: both round away from zero (up, for the non-negative quantities that occur in
//! practice).

/// A quantity that Kubernetes would reject, or that does not fit the engine's integer range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not a Kubernetes quantity.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text:?}"
    )]
    Invalid {
        /// The offending text.
        text: String,
    },
    /// The quantity is valid but too large to represent.
    #[error("quantity {text:?} is too large")]
    Overflow {
        /// The offending text.
        text: String,
    },
}

/// Nano-units per unit.
pub const NANO_PER_UNIT: i128 = 1_000_000_000;
/// Nano-units per milli-unit.
pub const NANO_PER_MILLI: i128 = 1_000_000;

/// Parse `q` into nano-units (value × 10⁹), rounding any sub-nano remainder away from zero.
///
/// # Errors
/// [`QuantityError::Invalid`] when `q` is not a quantity, [`QuantityError::Overflow`] when its
/// value × 10⁹ does not fit an `i128`.
pub fn parse_nano(q: &str) -> Result<i128, QuantityError> {
    if let Some(v) = parse_nano_fast(q.as_bytes()) {
        return Ok(v);
    }
    parse_nano_general(q)
}

/// The common shapes (`123`, `1.5`, `500m`, `2Gi`, `64k`) without sign or exponent, computed in
/// 64-bit arithmetic; `None` defers to the general parser (which also reports errors).
fn parse_nano_fast(b: &[u8]) -> Option<i128> {
    let mut pos = 0;
    let mut int: u64 = 0;
    while pos < b.len() && b[pos].is_ascii_digit() {
        if pos >= 18 {
            return None;
        }
        int = int * 10 + u64::from(b[pos] - b'0');
        pos += 1;
    }
    let int_len = pos;
    let (mut frac, mut frac_pow): (u64, u64) = (0, 1);
    let mut frac_len = 0;
    if pos < b.len() && b[pos] == b'.' {
        pos += 1;
        while pos < b.len() && b[pos].is_ascii_digit() {
            if frac_len >= 9 {
                return None;
            }
            frac = frac * 10 + u64::from(b[pos] - b'0');
            frac_pow *= 10;
            frac_len += 1;
            pos += 1;
        }
    }
    if int_len + frac_len == 0 {
        return None;
    }
    let scale: u64 = match &b[pos..] {
        b"" => 1_000_000_000,
        b"m" => 1_000_000,
        b"u" => 1_000,
        b"k" => 1_000_000_000_000,
        b"M" => 1_000_000_000_000_000,
        b"Ki" => 1_024_000_000_000,
        b"Mi" => 1_048_576_000_000_000,
        b"G" => 1_000_000_000_000_000_000,
        b"Gi" => 1_073_741_824_000_000_000,
        _ => return None,
    };
    let whole = i128::from(int) * i128::from(scale);
    if frac == 0 {
        return Some(whole);
    }
    let f = u128::from(frac) * u128::from(scale);
    let div = u128::from(frac_pow);
    if f % div != 0 {
        return None;
    }
    i128::try_from(f / div).ok().map(|f| whole + f)
}

fn parse_nano_general(q: &str) -> Result<i128, QuantityError> {
    let invalid = || QuantityError::Invalid { text: q.to_owned() };
    let overflow = || QuantityError::Overflow { text: q.to_owned() };
    let b = q.as_bytes();
    let mut pos = 0;
    let mut negative = false;
    match b.first() {
        Some(b'-') => {
            negative = true;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    let int_start = pos;
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let int_digits = &b[int_start..pos];
    let mut frac_digits: &[u8] = &[];
    if pos < b.len() && b[pos] == b'.' {
        pos += 1;
        let s = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        frac_digits = &b[s..pos];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(invalid());
    }
    let suffix = &q[pos..];

    // Suffix → (base-10 exponent, base-2 exponent).
    let (pow10, pow2): (i64, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(invalid());
            }
            // Go parses the exponent as an int; anything beyond ±10^9 is absurd for a quantity.
            let e: i64 = exp.parse().map_err(|_| overflow())?;
            if !(-1_000_000_000..=1_000_000_000).contains(&e) {
                return Err(overflow());
            }
            (e, 0)
        }
        _ => return Err(invalid()),
    };

    // Mantissa: all digits, without leading zeros and without trailing fractional zeros.
    let mut frac = frac_digits;
    while let [rest @ .., b'0'] = frac {
        frac = rest;
    }
    let mut mantissa: i128 = 0;
    let mut significant = false;
    for &d in int_digits.iter().chain(frac.iter()) {
        if d != b'0' {
            significant = true;
        }
        if significant {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(d - b'0')))
                .ok_or_else(overflow)?;
        }
    }
    if mantissa == 0 {
        return Ok(0);
    }
    mantissa = mantissa.checked_mul(1i128 << pow2).ok_or_else(overflow)?;
    // value = mantissa × 10^(pow10 − frac.len()); in nano-units add 9.
    let frac_len = i64::try_from(frac.len()).map_err(|_| overflow())?;
    let p = pow10 + 9 - frac_len;
    let magnitude = if p >= 0 {
        let factor = pow10_i128(p).ok_or_else(overflow)?;
        mantissa.checked_mul(factor).ok_or_else(overflow)?
    } else {
        match pow10_i128(-p) {
            Some(div) => div_away(mantissa, div),
            // The divisor exceeds any mantissa: a non-zero value smaller than 1n.
            None => 1,
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// `Quantity.MilliValue()`: the value × 1000, rounded away from zero (up for positive values).
///
/// # Errors
/// As [`parse_nano`].
pub fn parse_milli(q: &str) -> Result<i128, QuantityError> {
    parse_nano(q).map(nano_to_milli)
}

/// `Quantity.Value()`: the value in whole units, rounded away from zero (up for positive values).
///
/// # Errors
/// As [`parse_nano`].
pub fn value_ceil(q: &str) -> Result<i128, QuantityError> {
    parse_nano(q).map(nano_to_value)
}

/// Convert nano-units to milli-units, rounding away from zero.
pub fn nano_to_milli(nano: i128) -> i128 {
    div_away(nano, NANO_PER_MILLI)
}

/// Convert nano-units to whole units, rounding away from zero.
pub fn nano_to_value(nano: i128) -> i128 {
    div_away(nano, NANO_PER_UNIT)
}

/// `n / d` (d > 0) rounded away from zero.
fn div_away(n: i128, d: i128) -> i128 {
    // 128-bit division is a slow library call; nearly every real value fits 64 bits.
    if let (Ok(n64), Ok(d64)) = (i64::try_from(n), i64::try_from(d)) {
        let q = n64 / d64;
        let adj = if n64 % d64 == 0 {
            0
        } else if n64 > 0 {
            1
        } else {
            -1
        };
        return i128::from(q + adj);
    }
    let q = n / d;
    if n % d == 0 {
        q
    } else if n > 0 {
        q + 1
    } else {
        q - 1
    }
}

fn pow10_i128(p: i64) -> Option<i128> {
    let p = u32::try_from(p).ok()?;
    10i128.checked_pow(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_suffixes() {
        assert_eq!(parse_milli("500m"), Ok(500));
        assert_eq!(parse_milli("1"), Ok(1000));
        assert_eq!(parse_milli("1.5"), Ok(1500));
        assert_eq!(value_ceil("1k"), Ok(1000));
        assert_eq!(value_ceil("2M"), Ok(2_000_000));
        assert_eq!(value_ceil("3G"), Ok(3_000_000_000));
        assert_eq!(value_ceil("1T"), Ok(1_000_000_000_000));
        assert_eq!(value_ceil("1P"), Ok(1_000_000_000_000_000));
        assert_eq!(value_ceil("1E"), Ok(1_000_000_000_000_000_000));
        assert_eq!(parse_nano("5n"), Ok(5));
        assert_eq!(parse_nano("5u"), Ok(5000));
    }

    #[test]
    fn binary_suffixes() {
        assert_eq!(value_ceil("1Ki"), Ok(1024));
        assert_eq!(value_ceil("2Mi"), Ok(2 * 1024 * 1024));
        assert_eq!(value_ceil("1Gi"), Ok(1 << 30));
        assert_eq!(value_ceil("1Ti"), Ok(1 << 40));
        assert_eq!(value_ceil("1Pi"), Ok(1 << 50));
        assert_eq!(value_ceil("1Ei"), Ok(1 << 60));
        assert_eq!(value_ceil("1.5Gi"), Ok(3 << 29));
        assert_eq!(parse_milli("0.5Ki"), Ok(512_000));
    }

    #[test]
    fn exponents() {
        assert_eq!(value_ceil("1e3"), Ok(1000));
        assert_eq!(value_ceil("1E3"), Ok(1000));
        assert_eq!(value_ceil("12e+2"), Ok(1200));
        assert_eq!(parse_milli("1e-3"), Ok(1));
        assert_eq!(parse_milli("15e-4"), Ok(2), "1.5m rounds up to 2m");
        assert_eq!(value_ceil("1e0"), Ok(1));
    }

    #[test]
    fn rounding_is_up_for_positive_values() {
        assert_eq!(value_ceil("100m"), Ok(1));
        assert_eq!(value_ceil("1001m"), Ok(2));
        assert_eq!(value_ceil("0.1"), Ok(1));
        assert_eq!(parse_milli("0.0001"), Ok(1));
        assert_eq!(parse_milli("1n"), Ok(1));
        assert_eq!(value_ceil("0"), Ok(0));
        assert_eq!(value_ceil("0.000"), Ok(0));
        assert_eq!(value_ceil("1e-40"), Ok(1));
    }

    #[test]
    fn signs_and_forms() {
        assert_eq!(value_ceil("+4"), Ok(4));
        assert_eq!(value_ceil("-4"), Ok(-4));
        assert_eq!(
            value_ceil("-100m"),
            Ok(-1),
            "away from zero like Kubernetes"
        );
        assert_eq!(parse_milli(".5"), Ok(500));
        assert_eq!(parse_milli("5."), Ok(5000));
        assert_eq!(parse_milli("1.G"), Ok(1_000_000_000_000));
        assert_eq!(value_ceil("007"), Ok(7));
        assert_eq!(
            value_ceil("1.000000000000000000000000000000000000000000000"),
            Ok(1)
        );
    }

    #[test]
    fn rejects_bad_text_and_names_it() {
        for bad in [
            "", "abc", "1K", "1x", "1e", "1Gib", "--1", "1 ", " 1", ".", "1e+", "m", "1.2.3",
            "1ee3",
        ] {
            let err = parse_milli(bad).expect_err(bad);
            assert_eq!(
                err,
                QuantityError::Invalid {
                    text: bad.to_owned()
                }
            );
            assert!(err.to_string().contains(&format!("{bad:?}")));
        }
    }

    #[test]
    fn fast_and_general_paths_agree() {
        for q in [
            "0",
            "7",
            "123456789012345678",
            "1.5",
            "0.001",
            "500m",
            "1.5m",
            "2.25Ki",
            "3Mi",
            "64k",
            "1.000000001",
            "12M",
            "3G",
            "1.25G",
            "7Gi",
            "0.1Gi",
            "0.5u",
            "1.2345678901",
            "999999999999999999",
            "5.",
            ".5",
            "1.5Gi",
            "2e3",
        ] {
            assert_eq!(parse_nano(q), parse_nano_general(q), "{q}");
        }
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        assert!(matches!(
            value_ceil("1e40"),
            Err(QuantityError::Overflow { .. })
        ));
        assert!(matches!(
            value_ceil("1e99999999999"),
            Err(QuantityError::Overflow { .. })
        ));
        assert!(matches!(
            value_ceil("999999999999999999999999999999999999999999"),
            Err(QuantityError::Overflow { .. })
        ));
        assert_eq!(value_ceil("1e20"), Ok(100_000_000_000_000_000_000));
    }
}
