//! Charts as SVG and PNG (plotters): one panel per phase, each with its own
//! axis and unit, so that a 1,000,000 stat/s phase does not flatten a
//! 5,000 create/s one. `compare` draws grouped bars (one bar per target in
//! each phase's panel, whiskers from min to max over iterations, the median
//! written on the bar); `sweep` draws lines against the swept parameter.
//!
//! Text is laid out with the DejaVu Sans font embedded in the binary, so
//! charts render the same on machines without system fonts.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{BenchError, Result};
use crate::report::{fmt_sig, TargetResult};
use crate::stats::Summary;

/// One panel: a phase and each series' statistics in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Phase name (panel title).
    pub title: String,
    /// Unit of the y axis.
    pub unit: String,
    /// One entry per series (bars) or per x value (lines); `None` = missing.
    pub values: Vec<Option<Summary>>,
}

/// Grouped bars: panels of phases, one bar per series (target) in each.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Title over all panels.
    pub title: String,
    /// Series (target) names, in bar order.
    pub series: Vec<String>,
    /// One panel per phase.
    pub panels: Vec<Panel>,
}

/// Lines against a swept parameter: one panel per phase.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Title over all panels.
    pub title: String,
    /// Name of the swept parameter (x axis).
    pub x_label: String,
    /// The parameter's values.
    pub xs: Vec<f64>,
    /// Names of the lines in each panel (empty: one unnamed line).
    pub series: Vec<String>,
    /// One panel per phase; `values[s * xs.len() + i]` is series `s` at
    /// `xs[i]`.
    pub panels: Vec<Panel>,
}

impl BarChart {
    /// The chart of a comparison: phases of the first target, a bar per target.
    pub fn from_results(title: &str, targets: &[TargetResult]) -> Self {
        let phases: Vec<(String, String)> = targets
            .first()
            .map(|t| {
                t.phases
                    .iter()
                    .map(|p| (p.phase.clone(), p.unit.clone()))
                    .collect()
            })
            .unwrap_or_default();
        BarChart {
            title: title.to_string(),
            series: targets.iter().map(|t| t.name.clone()).collect(),
            panels: phases
                .into_iter()
                .map(|(phase, unit)| Panel {
                    values: targets
                        .iter()
                        .map(|t| t.phase(&phase).and_then(|p| p.summary()))
                        .collect(),
                    title: phase,
                    unit,
                })
                .collect(),
        }
    }
}

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (style, bytes) in [
            (FontStyle::Normal, dejavu::sans::regular()),
            (FontStyle::Bold, dejavu::sans::bold()),
        ] {
            if plotters::style::register_font("sans-serif", style, bytes).is_err() {
                tracing::warn!("embedded font did not load; charts may lack text");
            }
        }
    });
}

const PANEL_W: u32 = 380;
const PANEL_H: u32 = 300;
const TITLE_H: u32 = 50;

fn grid(n: usize) -> (usize, usize) {
    let cols = n.clamp(1, 3);
    (cols, n.div_ceil(cols).max(1))
}

fn size(n: usize) -> (u32, u32) {
    let (cols, rows) = grid(n);
    (cols as u32 * PANEL_W, TITLE_H + rows as u32 * PANEL_H)
}

/// `base` with `suffix` appended: `run.v2` becomes `run.v2.svg`, where
/// `Path::with_extension` would make it `run.svg`.
pub fn with_suffix(base: &Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Writes `<base>.svg` and `<base>.png`; returns both paths.
pub fn write_bars(base: &Path, chart: &BarChart) -> Result<Vec<PathBuf>> {
    write_both(base, chart.panels.len(), |area| draw_bars(area, chart))
}

/// Writes `<base>.svg` and `<base>.png` of a sweep; returns both paths.
pub fn write_lines(base: &Path, chart: &LineChart) -> Result<Vec<PathBuf>> {
    write_both(base, chart.panels.len(), |area| draw_lines(area, chart))
}

/// Either backend's drawing area, so one drawing function serves both.
enum AnyArea<'a> {
    Svg(DrawingArea<SVGBackend<'a>, Shift>),
    Png(DrawingArea<BitMapBackend<'a>, Shift>),
}

fn write_both<F>(base: &Path, panels: usize, draw: F) -> Result<Vec<PathBuf>>
where
    F: Fn(AnyArea<'_>) -> std::result::Result<(), String>,
{
    register_fonts();
    if let Some(parent) = base.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| BenchError::Chart {
            path: parent.to_path_buf(),
            reason: e.to_string(),
        })?;
    }
    let svg = with_suffix(base, ".svg");
    let png = with_suffix(base, ".png");
    let dims = size(panels);
    let fail = |path: &Path, reason: String| BenchError::Chart {
        path: path.to_path_buf(),
        reason,
    };
    draw(AnyArea::Svg(
        SVGBackend::new(&svg, dims).into_drawing_area(),
    ))
    .map_err(|e| fail(&svg, e))?;
    draw(AnyArea::Png(
        BitMapBackend::new(&png, dims).into_drawing_area(),
    ))
    .map_err(|e| fail(&png, e))?;
    Ok(vec![svg, png])
}

fn draw_bars(area: AnyArea<'_>, chart: &BarChart) -> std::result::Result<(), String> {
    match area {
        AnyArea::Svg(a) => bars_on(a, chart),
        AnyArea::Png(a) => bars_on(a, chart),
    }
}

fn draw_lines(area: AnyArea<'_>, chart: &LineChart) -> std::result::Result<(), String> {
    match area {
        AnyArea::Svg(a) => lines_on(a, chart),
        AnyArea::Png(a) => lines_on(a, chart),
    }
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Splits the area under the title into one sub-area per panel.
fn panel_areas<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    n: usize,
) -> std::result::Result<Vec<DrawingArea<DB, Shift>>, String> {
    root.fill(&WHITE).map_err(err)?;
    let (top, rest) = root.split_vertically(TITLE_H);
    top.titled(title, ("sans-serif", 22).into_font().style(FontStyle::Bold))
        .map_err(err)?;
    let (cols, rows) = grid(n);
    Ok(rest
        .split_evenly((rows, cols))
        .into_iter()
        .take(n)
        .collect())
}

/// Axis labels: whole numbers without decimals, others as in tables.
fn fmt_axis(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{v:.0}")
    } else {
        fmt_sig(v)
    }
}

fn y_top(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.fold(0.0f64, f64::max);
    if m > 0.0 && m.is_finite() {
        m * 1.18
    } else {
        1.0
    }
}

fn bars_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    chart: &BarChart,
) -> std::result::Result<(), String> {
    let areas = panel_areas(&root, &chart.title, chart.panels.len())?;
    // A segmented 0..=last range has one slot per series (a degenerate
    // 0..=0 range would not draw, so a lone series gets an empty neighbour).
    let last = (chart.series.len() as i32 - 1).max(1);
    for (area, panel) in areas.iter().zip(&chart.panels) {
        let top = y_top(panel.values.iter().flatten().map(|s| s.max.max(s.median)));
        let mut c = ChartBuilder::on(area)
            .margin(8)
            .caption(&panel.title, ("sans-serif", 16))
            .x_label_area_size(28)
            .y_label_area_size(62)
            .build_cartesian_2d((0..last).into_segmented(), 0.0..top)
            .map_err(err)?;
        let series = &chart.series;
        c.configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .y_desc(&panel.unit)
            .y_label_formatter(&|v| fmt_axis(*v))
            .x_labels(series.len().max(1))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    series.get(*i as usize).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        for (i, v) in panel.values.iter().enumerate() {
            let Some(s) = v else { continue };
            let i = i as i32;
            let color = Palette99::pick(i as usize);
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), s.median),
                ],
                color.mix(0.8).filled(),
            );
            bar.set_margin(0, 0, 10, 10);
            c.draw_series(std::iter::once(bar)).map_err(err)?;
            if s.max > s.min {
                c.draw_series(std::iter::once(PathElement::new(
                    vec![
                        (SegmentValue::CenterOf(i), s.min),
                        (SegmentValue::CenterOf(i), s.max),
                    ],
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?;
            }
            let label_style = ("sans-serif", 12).into_font().color(&BLACK).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Bottom,
                ),
            );
            c.draw_series(std::iter::once(
                EmptyElement::at((SegmentValue::CenterOf(i), s.max.max(s.median)))
                    + Text::new(fmt_sig(s.median), (0, -4), label_style),
            ))
            .map_err(err)?;
        }
    }
    root.present().map_err(err)
}

fn lines_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    chart: &LineChart,
) -> std::result::Result<(), String> {
    let areas = panel_areas(&root, &chart.title, chart.panels.len())?;
    let x_min = chart.xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x_max = chart.xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (x0, x1) = if x_min.is_finite() && x_max > x_min {
        let pad = (x_max - x_min) * 0.15;
        (x_min - pad, x_max + pad)
    } else {
        (x_min.min(0.0) - 1.0, x_max.max(0.0) + 1.0)
    };
    for (area, panel) in areas.iter().zip(&chart.panels) {
        let top = y_top(panel.values.iter().flatten().map(|s| s.max.max(s.median)));
        let mut c = ChartBuilder::on(area)
            .margin(8)
            .caption(&panel.title, ("sans-serif", 16))
            .x_label_area_size(36)
            .y_label_area_size(62)
            .build_cartesian_2d(x0..x1, 0.0..top)
            .map_err(err)?;
        c.configure_mesh()
            .light_line_style(WHITE)
            .disable_x_mesh()
            .x_desc(&chart.x_label)
            .y_desc(&panel.unit)
            .x_labels(64)
            // Label only the swept values, not the axis's own ticks.
            .x_label_formatter(&|v| {
                let tolerance = (x1 - x0) / 200.0;
                match chart.xs.iter().find(|x| (*x - v).abs() < tolerance) {
                    Some(x) => fmt_axis(*x),
                    None => String::new(),
                }
            })
            .y_label_formatter(&|v| fmt_axis(*v))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        let n = chart.xs.len();
        let names: Vec<Option<&str>> = if chart.series.is_empty() {
            vec![None]
        } else {
            chart.series.iter().map(|s| Some(s.as_str())).collect()
        };
        for (si, name) in names.iter().enumerate() {
            let values = panel.values.iter().skip(si * n).take(n);
            let points: Vec<(f64, Summary)> = chart
                .xs
                .iter()
                .zip(values)
                .filter_map(|(x, v)| v.map(|s| (*x, s)))
                .collect();
            let color = Palette99::pick(si);
            let line = c
                .draw_series(LineSeries::new(
                    points.iter().map(|(x, s)| (*x, s.median)),
                    color.stroke_width(2),
                ))
                .map_err(err)?;
            if let Some(name) = name {
                let key = color.stroke_width(3);
                line.label(*name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], key));
            }
            c.draw_series(
                points
                    .iter()
                    .map(|(x, s)| Circle::new((*x, s.median), 4, color.filled())),
            )
            .map_err(err)?;
            for (x, s) in &points {
                if s.max > s.min {
                    c.draw_series(std::iter::once(PathElement::new(
                        vec![(*x, s.min), (*x, s.max)],
                        BLACK.stroke_width(1),
                    )))
                    .map_err(err)?;
                }
                c.draw_series(std::iter::once(
                    EmptyElement::at((*x, s.max.max(s.median)))
                        + Text::new(
                            fmt_sig(s.median),
                            (6, -16),
                            ("sans-serif", 11).into_font().color(&BLACK),
                        ),
                ))
                .map_err(err)?;
            }
        }
        if names.len() > 1 {
            c.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(err)?;
        }
    }
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_suffixes_are_appended_so_dots_in_names_stay() {
        assert_eq!(
            with_suffix(Path::new("out/run.v1.2"), ".svg"),
            PathBuf::from("out/run.v1.2.svg")
        );
        assert_eq!(
            with_suffix(Path::new("plain"), ".png"),
            PathBuf::from("plain.png")
        );
    }
}
