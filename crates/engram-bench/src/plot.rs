//! PNG charts of a run: one per suite (median time against size, one panel
//! per setup, one line per implementation, log scales) and `speedup.png`
//! (Engram's speedup over PMDK tx at every size, one panel per setup).
//!
//! Fonts: plotters draws text with ab_glyph from a TrueType file read at run
//! time (DejaVu Sans from `fonts-dejavu-core`, or another common sans
//! font), so no system library is linked. Without any such font the plots
//! are skipped with [`PlotError::NoFont`] and the rest of the report is
//! still written.

use std::path::Path;

use plotters::coord::Shift;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::prelude::*;

use crate::job::{Impl, Suite};
use crate::plan::Setup;
use crate::report::impl_label;
use crate::results::Row;

/// Fonts tried in order, as `sans-serif`.
const FONT_PATHS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// Why plots could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No usable TrueType font was found.
    #[error("no TrueType font found (tried {tried}); install fonts-dejavu-core")]
    NoFont { tried: String },
    /// Drawing or encoding the PNG failed.
    #[error("drawing {file}: {message}")]
    Draw { file: String, message: String },
}

/// Registers the first font found as `sans-serif`. Idempotent.
pub(crate) fn register_font() -> Result<(), PlotError> {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        FONT_PATHS.iter().any(|p| match std::fs::read(p) {
            // The font table keeps a 'static reference: leak the bytes once.
            Ok(bytes) => plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into_boxed_slice())).is_ok(),
            Err(_) => false,
        })
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::NoFont { tried: FONT_PATHS.join(", ") })
    }
}

fn color(imp: Impl) -> RGBColor {
    match imp {
        Impl::Engram => RGBColor(0x1f, 0x77, 0xb4),
        Impl::EngramProcess => RGBColor(0x17, 0xbe, 0xcf),
        Impl::PmdkTx => RGBColor(0xd6, 0x27, 0x28),
        Impl::PmdkAtomic => RGBColor(0xff, 0x7f, 0x0e),
        Impl::Malloc | Impl::Volatile => RGBColor(0x2c, 0xa0, 0x2c),
    }
}

fn draw_err(file: &str) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError::Draw { file: file.to_string(), message }
}

/// Draws every chart into `dir`; returns the file names written.
pub fn draw_all(rows: &[Row], setups: &[Setup], dir: &Path) -> Result<Vec<String>, PlotError> {
    register_font()?;
    let mut written = Vec::new();
    for suite in Suite::ALL {
        if rows.iter().any(|r| r.point.suite == suite) {
            let file = format!("{}.png", suite.name());
            suite_chart(rows, suite, setups, &dir.join(&file)).map_err(draw_err(&file))?;
            written.push(file);
        }
    }
    if rows.iter().any(|r| r.imp == Impl::Engram && r.speedup.is_some()) {
        let file = "speedup.png".to_string();
        speedup_chart(rows, setups, &dir.join(&file)).map_err(draw_err(&file))?;
        written.push(file);
    }
    Ok(written)
}

/// Rows of one panel: sps only where swaps = n (the fixed-swaps points are
/// in the tables and in `speedup.png`).
fn panel_rows(rows: &[Row], suite: Suite, setup: Setup) -> Vec<&Row> {
    rows.iter()
        .filter(|r| r.point.suite == suite && r.setup == setup)
        .filter(|r| suite != Suite::Sps || r.point.swaps == r.point.size)
        .collect()
}

fn suite_chart(rows: &[Row], suite: Suite, setups: &[Setup], path: &Path) -> Result<(), String> {
    let panels: Vec<Setup> = setups.iter().copied().filter(|&s| !panel_rows(rows, suite, s).is_empty()).collect();
    let width = 620 * panels.len().max(1) as u32;
    let root = BitMapBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(&format!("{}: median time (lower is better)", suite.name()), ("sans-serif", 26))
        .map_err(|e| e.to_string())?;
    for (area, setup) in root.split_evenly((1, panels.len().max(1))).iter().zip(&panels) {
        time_panel(area, &panel_rows(rows, suite, *setup), suite, *setup)?;
    }
    root.present().map_err(|e| e.to_string())
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        (1.0, 10.0)
    } else {
        (lo, hi)
    }
}

fn time_panel(area: &DrawingArea<BitMapBackend<'_>, Shift>, rows: &[&Row], suite: Suite, setup: Setup) -> Result<(), String> {
    let x = |r: &Row| r.point.size as f64;
    let y = |r: &Row| r.nanos as f64 / 1e6;
    let (xlo, xhi) = bounds(rows.iter().map(|r| x(r)));
    let (ylo, yhi) = bounds(rows.iter().map(|r| y(r)));
    let fs = rows.first().map_or(String::new(), |r| r.fs.clone());
    let caption = format!("{} setup ({fs})", setup.name());
    let mut builder = ChartBuilder::on(area);
    builder.caption(caption, ("sans-serif", 20)).margin(16).x_label_area_size(44).y_label_area_size(70);
    let yrange = (ylo / 2.0..yhi * 2.0).log_scale();
    let desc = match suite {
        Suite::BinaryTrees => "max depth",
        Suite::Nbody => "steps",
        Suite::Sps => "n (swaps = n)",
    };
    macro_rules! finish {
        ($chart:expr, $fmt_x:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(desc)
                .y_desc("time (ms)")
                .x_label_formatter($fmt_x)
                .y_label_formatter(&|v: &f64| fmt_tick(*v))
                .label_style(("sans-serif", 15))
                .axis_desc_style(("sans-serif", 16))
                .draw()
                .map_err(|e| e.to_string())?;
            let mut imps: Vec<Impl> = rows.iter().map(|r| r.imp).collect();
            imps.sort();
            imps.dedup();
            for imp in imps {
                let c = color(imp);
                let pts: Vec<(f64, f64)> = rows.iter().filter(|r| r.imp == imp).map(|r| (x(r), y(r))).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
                    .map_err(|e| e.to_string())?
                    .label(impl_label(imp))
                    .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 24, ly)], c.stroke_width(3)));
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 5, c.filled())))
                    .map_err(|e| e.to_string())?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .label_font(("sans-serif", 15))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    if suite == Suite::BinaryTrees {
        let chart = builder.build_cartesian_2d(xlo - 0.5..xhi + 0.5, yrange).map_err(|e| e.to_string())?;
        finish!(chart, &|v: &f64| if (v - v.round()).abs() < 1e-6 { format!("{v:.0}") } else { String::new() });
    } else {
        let chart = builder.build_cartesian_2d((xlo / 2.0..xhi * 2.0).log_scale(), yrange).map_err(|e| e.to_string())?;
        finish!(chart, &|v: &f64| power_of_ten(*v));
    }
    Ok(())
}

/// `10^k` at exact powers of ten (k >= 1), nothing elsewhere: log-axis labels.
fn power_of_ten(v: f64) -> String {
    let k = v.log10();
    if v > 0.0 && (k - k.round()).abs() < 1e-6 {
        match k.round() as i32 {
            0 => "1".into(),
            k => format!("10^{k}"),
        }
    } else {
        String::new()
    }
}

/// A y-axis tick: at most 3 significant digits, no trailing zeros.
fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Short category label of a row for the speedup chart.
fn short_label(r: &Row) -> String {
    let p = r.point;
    match p.suite {
        Suite::BinaryTrees => format!("bt {}", p.size),
        Suite::Nbody => format!("nb {}", crate::plan::pow10(p.size)),
        Suite::Sps if p.swaps == p.size => format!("sps {}", crate::plan::pow10(p.size)),
        Suite::Sps => format!("sps {}/{}", crate::plan::pow10(p.size), crate::plan::pow10(p.swaps)),
    }
}

fn speedup_chart(rows: &[Row], setups: &[Setup], path: &Path) -> Result<(), String> {
    let panels: Vec<(Setup, Vec<&Row>)> = setups
        .iter()
        .map(|&s| (s, rows.iter().filter(|r| r.setup == s && r.imp == Impl::Engram && r.speedup.is_some()).collect::<Vec<_>>()))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let root = BitMapBackend::new(path, (1400, 430 * panels.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled("Engram speedup over PMDK tx (PMDK time / Engram time; above 1 = Engram faster; red bars: slower)", ("sans-serif", 24))
        .map_err(|e| e.to_string())?;
    for (area, (setup, bars)) in root.split_evenly((panels.len().max(1), 1)).iter().zip(&panels) {
        speedup_panel(area, *setup, bars)?;
    }
    root.present().map_err(|e| e.to_string())
}

fn speedup_panel(area: &DrawingArea<BitMapBackend<'_>, Shift>, setup: Setup, bars: &[&Row]) -> Result<(), String> {
    let labels: Vec<String> = bars.iter().map(|r| short_label(r)).collect();
    let values: Vec<f64> = bars.iter().map(|r| r.speedup.unwrap_or(0.0)).collect();
    let hi = values.iter().copied().fold(1.0, f64::max);
    let fs = bars.first().map_or(String::new(), |r| r.fs.clone());
    let n = bars.len() as i32;
    // A segmented range 0..k has k + 1 slots; one bar still needs a range.
    let last = (n - 1).max(1);
    let log = hi > 30.0;
    let caption = format!("{} setup ({fs}){}", setup.name(), if log { ", log scale" } else { "" });
    let mut builder = ChartBuilder::on(area);
    builder.caption(caption, ("sans-serif", 20)).margin(14).x_label_area_size(40).y_label_area_size(60);
    let fmt_x = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    macro_rules! bars {
        ($chart:expr, $base:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(bars.len())
                .x_label_formatter(&fmt_x)
                .y_label_formatter(&|v: &f64| fmt_tick(*v))
                .y_desc("speedup (×)")
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 16))
                .draw()
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(values.iter().enumerate().map(|(i, &v)| {
                    let i = i as i32;
                    // Engram's colour where it is faster, PMDK's where it is slower.
                    let c = if v >= 1.0 { color(Impl::Engram) } else { color(Impl::PmdkTx) };
                    let mut r = Rectangle::new([(SegmentValue::Exact(i), $base), (SegmentValue::Exact(i + 1), v)], c.mix(0.8).filled());
                    r.set_margin(0, 0, 12, 12);
                    r
                }))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(values.iter().enumerate().map(|(i, &v)| {
                    let style = TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
                    Text::new(crate::report::fmt_ratio(v), (SegmentValue::CenterOf(i as i32), v), style)
                }))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(LineSeries::new(vec![(SegmentValue::Exact(0), 1.0), (SegmentValue::Last, 1.0)], BLACK.stroke_width(2)))
                .map_err(|e| e.to_string())?;
        }};
    }
    if log {
        let chart = builder.build_cartesian_2d((0..last).into_segmented(), (0.1..hi * 3.0).log_scale()).map_err(|e| e.to_string())?;
        bars!(chart, 0.1);
    } else {
        let chart = builder.build_cartesian_2d((0..last).into_segmented(), 0.0..hi * 1.2).map_err(|e| e.to_string())?;
        bars!(chart, 0.0);
    }
    Ok(())
}
