//! Axis ranges and tick labels shared by the figures: padded ranges for linear and log
//! axes, log-axis ticks, and compact scientific labels.

/// `1.5e-6` -> `1.5e-6`, keeping two significant digits for log axes.
pub fn sci(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let e = x.abs().log10().floor() as i32;
    let m = x / 10f64.powi(e);
    if (m - 1.0).abs() < 1e-9 {
        format!("1e{e}")
    } else {
        format!("{m:.1}e{e}")
    }
}

/// A padded range around finite values, for linear axes.
pub fn padded(values: impl IntoIterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let span = (hi - lo).max(hi.abs() * 1e-3).max(1e-9);
    (lo - pad * span, hi + pad * span)
}

/// A padded range for log axes (multiplicative padding).
pub fn padded_log(values: impl IntoIterator<Item = f64>, factor: f64) -> (f64, f64) {
    let (lo, hi) = padded(values.into_iter().filter(|v| *v > 0.0).map(f64::ln), 0.0);
    ((lo).exp() / factor, (hi).exp() * factor)
}

/// Tick values for a log axis on `[lo, hi]`: decades and their 2x/5x steps when the range
/// is wide, finer steps (or evenly spaced round values) when it spans less than a decade.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let within = |mantissas: &[f64]| -> Vec<f64> {
        let (k0, k1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        (k0..=k1)
            .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
            .filter(|v| *v >= lo && *v <= hi)
            .collect()
    };
    for set in [
        &[1.0][..],
        &[1.0, 3.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
        &[1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0],
    ] {
        let t = within(set);
        if (3..=9).contains(&t.len()) {
            return t;
        }
    }
    // Less than a factor of ~1.5: round linear steps.
    let step = {
        let raw = (hi - lo) / 5.0;
        let p = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * p)
            .find(|s| (hi - lo) / s <= 7.0)
            .unwrap_or(raw)
    };
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}
