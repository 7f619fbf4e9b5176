//! Figures, one function per figure, each written as PNG and SVG with an embedded font
//! (DejaVu Sans through ab_glyph: no fontconfig, the same text on every machine).

pub mod block;
pub mod cost;
pub mod curves;
pub mod heatmap;
pub mod layers;
pub mod lines;
pub mod scaling;

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::prelude::*;

pub use block::block_size;
pub use cost::depth_cost;
pub use curves::training_curves;
pub use heatmap::{depth_attention, depth_width};
pub use layers::layer_profiles;
pub use lines::{Line, Panel, interval_lines};
pub use scaling::{multiplier_curve, scaling};

pub const FONT: &str = "sans-serif";

/// Colours by arm, readable on white and distinct in greyscale order.
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(33, 33, 33),    // baseline: near-black
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // green
    RGBColor(204, 121, 167), // purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky
    RGBColor(120, 94, 60),   // brown
    RGBColor(0, 128, 128),   // teal
    RGBColor(150, 150, 0),   // olive
    RGBColor(170, 0, 120),   // magenta
    RGBColor(130, 130, 130), // grey
];

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (style, bytes) in [
            (FontStyle::Normal, dejavu::sans::regular()),
            (FontStyle::Bold, dejavu::sans::bold()),
            (FontStyle::Italic, dejavu::sans::oblique()),
        ] {
            // The bundled DejaVu files are valid TrueType; a failure would leave plotters
            // without text, which the figure tests catch.
            let _ = plotters::style::register_font(FONT, style, bytes);
        }
    });
}

/// A figure that can draw itself on any plotters backend.
pub trait Figure {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Turns a plotters error into a message.
pub fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Writes `DIR/NAME.png` and `DIR/NAME.svg`; returns the PNG path.
pub fn save(
    figure: &impl Figure,
    dir: &Path,
    name: &str,
    size: (u32, u32),
) -> anyhow::Result<PathBuf> {
    register_font();
    std::fs::create_dir_all(dir)?;
    let png = dir.join(format!("{name}.png"));
    let svg = dir.join(format!("{name}.svg"));
    render(
        figure,
        BitMapBackend::new(&png, size).into_drawing_area(),
        &png,
    )?;
    render(
        figure,
        SVGBackend::new(&svg, size).into_drawing_area(),
        &svg,
    )?;
    Ok(png)
}

fn render<DB: DrawingBackend>(
    figure: &impl Figure,
    area: DrawingArea<DB, Shift>,
    path: &Path,
) -> anyhow::Result<()> {
    let fail = |e: String| anyhow::anyhow!("{}: {e}", path.display());
    area.fill(&WHITE).map_err(|e| fail(err(e)))?;
    figure.draw(&area).map_err(fail)?;
    area.present().map_err(|e| fail(err(e)))
}

/// The axes every line figure uses: tick labels at `(labels, titles)` points, no fine grid.
pub fn house_mesh<'m, 'a, 'b, X, Y, DB>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
    (labels, titles): (u32, u32),
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged,
    Y: Ranged,
    DB: DrawingBackend,
{
    mesh.label_style((FONT, labels))
        .axis_desc_style((FONT, titles))
        .light_line_style(WHITE.mix(0.0))
}

/// The legend box every figure uses.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .label_font((FONT, font_size))
        .draw()
        .map_err(err)
}

/// Width in pixels of the legend column that [`side_legend`] draws.
pub const SIDE_LEGEND_WIDTH: u32 = 250;

/// One legend for all panels of a figure, drawn as a column in `area` (right of the
/// panels), so that no entry covers data however many arms a sweep has. Each entry is an
/// arm name and its colour; `notes` are grey lines under the entries (how to read the lines).
pub fn side_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, RGBColor)],
    notes: &[&str],
) -> Result<(), String> {
    let (x, mut y) = (12, 50);
    let font = (FONT, 13).into_font();
    for (label, c) in entries {
        area.draw(&PathElement::new(
            vec![(x, y), (x + 22, y)],
            c.stroke_width(3),
        ))
        .map_err(err)?;
        area.draw(&Circle::new((x + 11, y), 3, c.filled()))
            .map_err(err)?;
        area.draw(&Text::new(label.clone(), (x + 30, y - 8), font.clone()))
            .map_err(err)?;
        y += 22;
    }
    y += 10;
    let grey = (FONT, 12).into_font().color(&BLACK.mix(0.6));
    for note in notes {
        area.draw(&Text::new(note.to_string(), (x, y), grey.clone()))
            .map_err(err)?;
        y += 18;
    }
    Ok(())
}

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
