//! Kubernetes quantities as the `kube` Lua module needs them: parsed with
//! [`flotilla_core::quantity`], remembered with the format they were written in, added, and
//! printed in `resource.Quantity.String()`'s canonical form (`1500m`, `3Gi`, `2k`, `5e3`).

use flotilla_core::quantity::{NANO_PER_UNIT, QuantityError, parse_nano};

/// How a quantity prints (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `Quantity{}`: no format yet (prints like `DecimalExponent`).
    Unset,
    /// `1k`, `500m`.
    DecimalSi,
    /// `1Ki`, `2Gi`.
    BinarySi,
    /// `1e3`.
    DecimalExponent,
}

/// A quantity: value in nano-units and the format it prints in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantity {
    pub(crate) nano: i128,
    pub(crate) format: Format,
}

impl Quantity {
    /// The zero `Quantity{}`.
    pub(crate) const ZERO: Quantity = Quantity {
        nano: 0,
        format: Format::Unset,
    };

    /// `resource.ParseQuantity`: the value and the format of its suffix.
    pub(crate) fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let nano = parse_nano(text)?;
        let suffix = text
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '+' || c == '-');
        let format = if suffix.ends_with('i') {
            Format::BinarySi
        } else if suffix.len() > 1 && (suffix.starts_with('e') || suffix.starts_with('E')) {
            Format::DecimalExponent
        } else {
            Format::DecimalSi
        };
        Ok(Quantity { nano, format })
    }

    /// A whole number of units in `format` (`resource.NewQuantity`).
    pub(crate) fn from_value(value: i128, format: Format) -> Quantity {
        Quantity {
            nano: value.saturating_mul(NANO_PER_UNIT),
            format,
        }
    }

    /// A number of milli-units in `format` (`resource.NewMilliQuantity`).
    pub(crate) fn from_milli(milli: i128, format: Format) -> Quantity {
        Quantity {
            nano: milli.saturating_mul(1_000_000),
            format,
        }
    }

    /// `Quantity.Add`: the sum takes the format of the addend when the running total is zero.
    pub(crate) fn add(&mut self, other: Quantity) -> Result<(), &'static str> {
        if self.nano == 0 {
            self.format = other.format;
        }
        self.nano = self
            .nano
            .checked_add(other.nano)
            .ok_or("quantity sum overflows")?;
        Ok(())
    }

    /// `Quantity.MilliValue()`: milli-units, rounded away from zero.
    pub(crate) fn milli_value(&self) -> i128 {
        ceil_div(self.nano, 1_000_000)
    }

    /// `Quantity.Value()`: units, rounded away from zero.
    pub(crate) fn value(&self) -> i128 {
        ceil_div(self.nano, NANO_PER_UNIT)
    }

    /// `Quantity.AsApproximateFloat64()`: mantissa × 10^exponent in floating point.
    pub(crate) fn approximate_f64(&self) -> f64 {
        let (mantissa, exponent) = strip_tens(self.nano, -9);
        // Float rounding of i128 → f64 is the approximation Kubernetes also makes.
        #[allow(clippy::cast_precision_loss)]
        let base = mantissa as f64;
        if exponent == 0 {
            base
        } else {
            base * 10f64.powi(exponent)
        }
    }

    /// `Quantity.String()`: the canonical form.
    pub(crate) fn canonical(&self) -> String {
        if self.nano == 0 {
            return "0".to_owned();
        }
        let mut format = self.format;
        if format == Format::BinarySi {
            let whole = self.nano % NANO_PER_UNIT == 0;
            let small = self.nano.abs() < 1024 * NANO_PER_UNIT;
            if small || !whole {
                format = Format::DecimalSi;
            }
        }
        match format {
            Format::BinarySi => {
                let mut v = self.nano / NANO_PER_UNIT;
                let mut exp = 0;
                while v % 1024 == 0 && exp < 60 {
                    v /= 1024;
                    exp += 10;
                }
                let suffix = match exp {
                    0 => "",
                    10 => "Ki",
                    20 => "Mi",
                    30 => "Gi",
                    40 => "Ti",
                    50 => "Pi",
                    _ => "Ei",
                };
                format!("{v}{suffix}")
            }
            Format::DecimalSi | Format::DecimalExponent | Format::Unset => {
                let (mut mantissa, mut exponent) = strip_tens(self.nano, -9);
                match exponent.rem_euclid(3) {
                    1 => {
                        mantissa *= 10;
                        exponent -= 1;
                    }
                    2 => {
                        mantissa *= 100;
                        exponent -= 2;
                    }
                    _ => {}
                }
                if format == Format::DecimalSi {
                    let suffix = match exponent {
                        -9 => Some("n"),
                        -6 => Some("u"),
                        -3 => Some("m"),
                        0 => Some(""),
                        3 => Some("k"),
                        6 => Some("M"),
                        9 => Some("G"),
                        12 => Some("T"),
                        15 => Some("P"),
                        18 => Some("E"),
                        _ => None,
                    };
                    if let Some(s) = suffix {
                        return format!("{mantissa}{s}");
                    }
                }
                if exponent == 0 {
                    mantissa.to_string()
                } else {
                    format!("{mantissa}e{exponent}")
                }
            }
        }
    }
}

/// `value` × 10^`exponent` with the trailing zeros of `value` moved into the exponent.
fn strip_tens(mut value: i128, mut exponent: i32) -> (i128, i32) {
    while value != 0 && value % 10 == 0 {
        value /= 10;
        exponent += 1;
    }
    (value, exponent)
}

/// `n / d` rounded away from zero.
fn ceil_div(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d == 0 {
        q
    } else if n > 0 {
        q + 1
    } else {
        q - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Quantity::parse(s).unwrap().canonical()
    }

    #[test]
    fn canonical_forms_match_kubernetes() {
        for (input, want) in [
            ("0.5", "500m"),
            ("1500m", "1500m"),
            ("1000m", "1"),
            ("2000", "2k"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("512", "512"),
            ("100Ki", "100Ki"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("0", "0"),
            ("0.1Gi", "107374182400m"),
            ("1E", "1E"),
            ("12e-3", "12e-3"),
            ("-1Gi", "-1Gi"),
        ] {
            assert_eq!(canon(input), want, "{input}");
        }
    }

    #[test]
    fn sums_take_the_format_of_the_first_non_zero_addend() {
        let mut q = Quantity::ZERO;
        q.add(Quantity::parse("1Gi").unwrap()).unwrap();
        q.add(Quantity::parse("512Mi").unwrap()).unwrap();
        assert_eq!(q.canonical(), "1536Mi");
        let mut q = Quantity::ZERO;
        q.add(Quantity::parse("250m").unwrap()).unwrap();
        q.add(Quantity::parse("1Ki").unwrap()).unwrap();
        assert_eq!(q.canonical(), "1024250m");
        assert_eq!(Quantity::ZERO.canonical(), "0");
    }

    #[test]
    fn values_round_away_from_zero() {
        let q = Quantity::parse("1500m").unwrap();
        assert_eq!(q.value(), 2);
        assert_eq!(q.milli_value(), 1500);
        assert_eq!(Quantity::parse("1n").unwrap().milli_value(), 1);
        assert!((Quantity::parse("250m").unwrap().approximate_f64() - 0.25).abs() < 1e-12);
        assert!((Quantity::parse("2Gi").unwrap().approximate_f64() - 2147483648.0).abs() < 1e-3);
    }
}
