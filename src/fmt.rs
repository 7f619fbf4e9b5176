//! Number formatting shared by every floor (tables, reports, the command line).

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `1.23 GB`, `456 MB`: decimal units, three significant digits.
pub fn bytes_text(bytes: f64) -> String {
    let units = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")];
    for (scale, unit) in units {
        if bytes >= scale {
            let x = bytes / scale;
            let digits = if x >= 100.0 {
                0
            } else if x >= 10.0 {
                1
            } else {
                2
            };
            return format!("{x:.digits$} {unit}");
        }
    }
    format!("{bytes:.0} B")
}

/// `n` and `noun`, plural unless `n` is 1: "1 run", "12 runs".
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A p-value to the precision a table carries: `0.013`, `<0.001` below that, `-` when not
/// finite.
pub fn p_value(p: f64) -> String {
    match p {
        p if !p.is_finite() => "-".into(),
        p if p < 0.001 => "<0.001".into(),
        p => format!("{p:.3}"),
    }
}

/// `95` -> `1m35s`, `7300` -> `2h01m`.
pub fn duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(bytes_text(1.234e9), "1.23 GB");
        assert_eq!(bytes_text(456.0e6), "456 MB");
        assert_eq!(bytes_text(12.5e3), "12.5 kB");
        assert_eq!(bytes_text(3.3e12), "3.30 TB");
        assert_eq!(bytes_text(12.0), "12 B");
    }

    #[test]
    fn counts_and_p_values_read_right() {
        assert_eq!(count(1, "run"), "1 run");
        assert_eq!(count(12, "run"), "12 runs");
        assert_eq!(p_value(0.0004), "<0.001");
        assert_eq!(p_value(0.0131), "0.013");
        assert_eq!(p_value(f64::NAN), "-");
    }
}
