//! Figures, one function per figure, each written as PNG and SVG with an embedded font
//! (DejaVu Sans through ab_glyph: no fontconfig, the same text on every machine).

mod axes;
pub mod block;
pub mod cost;
pub mod curves;
pub mod forest;
mod frame;
pub mod heatmap;
pub mod layers;
pub mod lines;
pub mod routing;
pub mod scaling;

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

pub use axes::{log_ticks, padded, padded_log, sci};
pub use block::block_size;
pub use cost::depth_cost;
pub use curves::training_curves;
pub use forest::forest;
pub use frame::{Frame, house_mesh};
pub use heatmap::{depth_attention, depth_width};
pub use layers::layer_profiles;
pub use lines::{Line, Panel, interval_lines};
pub use routing::routing;
pub use scaling::{multiplier_curve, scaling};

pub const FONT: &str = "sans-serif";

/// Colours by arm, readable on white: the Okabe-Ito set first, then eight more chosen so that
/// no two of the sixteen are closer than 20 in CIELAB (a test holds them to it).
pub const PALETTE: [RGBColor; 16] = [
    RGBColor(33, 33, 33),    // baseline: near-black
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky
    RGBColor(120, 94, 60),   // brown
    RGBColor(117, 112, 179), // slate
    RGBColor(150, 150, 0),   // olive
    RGBColor(170, 0, 120),   // magenta
    RGBColor(150, 150, 150), // grey
    RGBColor(0, 60, 90),     // navy
    RGBColor(250, 120, 120), // salmon
    RGBColor(40, 110, 40),   // forest
    RGBColor(180, 40, 40),   // brick
];

/// The colour of the `i`-th arm of a figure (past 16 the colours repeat; the markers of
/// [`marker`] then still tell arms apart up to 16 x 5).
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Point shapes, cycled more slowly than colours so that colour and shape together differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
}

/// The marker of the `i`-th arm: adjacent arms differ in shape as well as colour.
pub fn marker(i: usize) -> Marker {
    const ALL: [Marker; 5] = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Diamond,
        Marker::Cross,
    ];
    ALL[i % ALL.len()]
}

/// Draws `points` as markers `m` of colour `c` (half-size 5 px), with a legend entry
/// showing the same marker when `label` is given.
pub fn draw_marked<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    points: &[(f64, f64)],
    m: Marker,
    c: RGBColor,
    label: Option<String>,
) -> Result<(), DrawError>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (r, fill, line) = (5, c.filled(), c.stroke_width(3));
    // One branch per shape: each series and legend entry has its own element type.
    macro_rules! marked {
        ($shape:expr) => {{
            let series = chart
                .draw_series(points.iter().map(|&p| EmptyElement::at(p) + $shape))
                .map_err(err)?;
            if let Some(label) = label {
                series
                    .label(label)
                    .legend(move |(x, y)| EmptyElement::at((x + 11, y)) + $shape);
            }
        }};
    }
    match m {
        Marker::Circle => marked!(Circle::new((0, 0), r, fill)),
        Marker::Square => marked!(Rectangle::new([(-r, -r), (r, r)], fill)),
        Marker::Triangle => marked!(Polygon::new(
            vec![(0, -r - 1), (-r - 1, r), (r + 1, r)],
            fill
        )),
        Marker::Diamond => marked!(Polygon::new(
            vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
            fill
        )),
        // Both strokes of the X in one path through the centre.
        Marker::Cross => marked!(PathElement::new(
            vec![(-r, -r), (r, r), (0, 0), (-r, r), (r, -r)],
            line
        )),
    }
    Ok(())
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
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), DrawError>;
}

/// What plotters reported when a figure would not draw: its backend's error (the file could
/// not be written) or a layout error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(String);

/// Turns a plotters error into a [`DrawError`].
pub fn err<E: std::fmt::Debug>(e: E) -> DrawError {
    DrawError(format!("{e:?}"))
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
    let fail = |e: DrawError| anyhow::anyhow!("{}: {e}", path.display());
    area.fill(&WHITE).map_err(|e| fail(err(e)))?;
    figure.draw(&area).map_err(fail)?;
    area.present().map_err(|e| fail(err(e)))
}

/// The legend box every figure uses.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<(), DrawError> {
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
) -> Result<(), DrawError> {
    let (x, mut y) = (12, 50);
    let font = (FONT, 16).into_font();
    for (label, c) in entries {
        area.draw(&PathElement::new(
            vec![(x, y), (x + 22, y)],
            c.stroke_width(3),
        ))
        .map_err(err)?;
        area.draw(&Circle::new((x + 11, y), 3, c.filled()))
            .map_err(err)?;
        area.draw(&Text::new(label.clone(), (x + 30, y - 9), font.clone()))
            .map_err(err)?;
        y += 26;
    }
    y += 10;
    let grey = (FONT, 14).into_font().color(&BLACK.mix(0.65));
    for note in notes {
        area.draw(&Text::new(note.to_string(), (x, y), grey.clone()))
            .map_err(err)?;
        y += 20;
    }
    Ok(())
}

/// What a figure's lines are over the seeds, after `lead`: "mean of 3 seeds", "one seed".
pub fn seeds_note(lead: &str, seeds: usize) -> String {
    match seeds {
        1 => format!("{lead}one seed"),
        n => format!("{lead}mean of {n} seeds"),
    }
}

/// A figure's frame: its title on top, `rows x cols` panels, and the side legend's area on
/// the right. Returns the panels (row-major) and the legend's area.
#[allow(clippy::type_complexity)]
pub fn titled_panels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    (rows, cols): (usize, usize),
) -> Result<(Vec<DrawingArea<DB, Shift>>, DrawingArea<DB, Shift>), DrawError> {
    let (title_area, body) = area.split_vertically(50);
    title_area.titled(title, (FONT, 22)).map_err(err)?;
    let (w, _) = body.dim_in_pixel();
    let (plots, legend_area) = body.split_horizontally(w - SIDE_LEGEND_WIDTH);
    Ok((plots.split_evenly((rows, cols)), legend_area))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CIELAB of an sRGB colour (D65).
    fn lab(c: RGBColor) -> [f64; 3] {
        let lin = |u: u8| {
            let u = f64::from(u) / 255.0;
            if u > 0.04045 {
                ((u + 0.055) / 1.055).powf(2.4)
            } else {
                u / 12.92
            }
        };
        let (r, g, b) = (lin(c.0), lin(c.1), lin(c.2));
        let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
        let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
        let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
        let f = |t: f64| {
            if t > 0.008856 {
                t.cbrt()
            } else {
                7.787 * t + 16.0 / 116.0
            }
        };
        [
            116.0 * f(y) - 16.0,
            500.0 * (f(x) - f(y)),
            200.0 * (f(y) - f(z)),
        ]
    }

    #[test]
    fn sixteen_arms_get_sixteen_distinguishable_colours_and_shapes() {
        for i in 0..16 {
            for j in 0..i {
                let (a, b) = (lab(color(i)), lab(color(j)));
                let d =
                    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
                assert!(
                    d >= 20.0,
                    "arms {j} and {i}: colours {d:.1} apart in CIELAB"
                );
                assert!(
                    (color(i), marker(i)) != (color(j), marker(j)),
                    "arms {j} and {i} look the same"
                );
            }
            // Neighbours in a legend differ in shape too.
            if i > 0 {
                assert_ne!(marker(i), marker(i - 1));
            }
        }
    }
}
