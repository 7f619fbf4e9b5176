//! The frame every chart shares, so that a figure's `draw` says only what differs: the
//! caption, margin and label areas ([`Frame`]), and the house style of the axes
//! ([`house_mesh`]).

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::AsRangedCoord;
use plotters::prelude::*;

use super::{DrawError, FONT, err};

/// A chart on axes `X` and `Y` (ranges, or ranges with a scale).
pub type Chart<'a, DB, X, Y> = ChartContext<
    'a,
    DB,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// A chart's caption size, the margin around it and the room for its x and y tick labels,
/// in pixels.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub caption: u32,
    pub margin: u32,
    pub x_labels: u32,
    pub y_labels: u32,
}

impl Frame {
    /// `caption` size, `margin`, room for the `x_labels` and the `y_labels`.
    pub const fn new(caption: u32, margin: u32, x_labels: u32, y_labels: u32) -> Self {
        Self {
            caption,
            margin,
            x_labels,
            y_labels,
        }
    }

    /// A figure of one chart.
    pub const FIGURE: Frame = Frame::new(22, 14, 50, 70);

    /// A chart titled `title` on `area`, with axes `x` and `y`.
    pub fn chart<'a, DB, X, Y>(
        self,
        area: &'a DrawingArea<DB, Shift>,
        title: impl AsRef<str>,
        x: X,
        y: Y,
    ) -> Result<Chart<'a, DB, X, Y>, DrawError>
    where
        DB: DrawingBackend,
        X: AsRangedCoord,
        Y: AsRangedCoord,
    {
        ChartBuilder::on(area)
            .caption(title, (FONT, self.caption))
            .margin(self.margin)
            .x_label_area_size(self.x_labels)
            .y_label_area_size(self.y_labels)
            .build_cartesian_2d(x, y)
            .map_err(err)
    }
}

/// The axes every figure uses: tick labels at `(labels, titles)` points, no fine grid.
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
