//! What both benchmark reports' charts share (the region benchmarks in
//! `plot.rs`, the STM benchmarks in `stm/plot.rs`): the font, the error
//! type, the series colours, axis-label formatting and small helpers.
//!
//! Plots are PNGs drawn by plotters' bitmap backend with a TrueType font
//! read at run time (`fonts-dejavu-core`), so no system graphics library is
//! needed.

use plotters::prelude::*;

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
    NoFont {
        /// The font files tried.
        tried: String,
    },
    /// Drawing or encoding the PNG failed.
    #[error("drawing {file}: {message}")]
    Draw {
        /// The PNG file.
        file: String,
        /// What plotters reported.
        message: String,
    },
}

/// Registers the first font found as `sans-serif`. Idempotent.
pub fn register_font() -> Result<(), PlotError> {
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

/// Turns a drawing failure for `file` into a [`PlotError::Draw`].
pub fn draw_err(file: &str) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError::Draw { file: file.to_string(), message }
}

/// Series colours, the same in every chart: Engram/PSTM blue, its
/// process-durability variant cyan, PMDK red (its atomic API orange), the
/// volatile baselines green.
pub mod colour {
    use plotters::style::RGBColor;
    /// Engram (regions) and PSTM.
    pub const ENGRAM: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
    /// Engram or PSTM in `process` durability (no flushes).
    pub const ENGRAM_PROCESS: RGBColor = RGBColor(0x17, 0xbe, 0xcf);
    /// PMDK transactions.
    pub const PMDK: RGBColor = RGBColor(0xd6, 0x27, 0x28);
    /// PMDK's atomic allocation API.
    pub const PMDK_ATOMIC: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
    /// Volatile baselines (malloc, volatile STM).
    pub const VOLATILE: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
    /// Other persistent TMs run in the same process (RomulusLog's algorithm).
    pub const PEER_TM: RGBColor = RGBColor(0x94, 0x67, 0xbd);
    /// A second persistent TM run in the same process (OneFile-LF's algorithm).
    pub const PEER_TM_2: RGBColor = RGBColor(0x8c, 0x56, 0x4b);
}

/// `10^k` at exact powers of ten (k >= 1), nothing elsewhere: log-axis labels.
pub fn power_of_ten(v: f64) -> String {
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
pub fn fmt_tick(v: f64) -> String {
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

/// The distinct values of `it`, sorted.
pub fn sorted<T: Ord + Copy>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = it.collect();
    v.sort();
    v.dedup();
    v
}

/// Draws the mesh of a chart whose x axis is one category per thread count
/// (category `i` at x = `i`, labelled `threads[i]`), with `y_desc` and
/// `y_fmt` on the y axis.
pub fn draw_threads_mesh<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>,
    threads: &[u32],
    y_desc: &str,
    y_fmt: &dyn Fn(&f64) -> String,
) -> Result<(), String> {
    chart
        .configure_mesh()
        .x_labels(threads.len().max(2))
        .x_label_formatter(&|v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                threads.get(i as usize).map_or(String::new(), |t| t.to_string())
            } else {
                String::new()
            }
        })
        .y_labels(8)
        .y_label_formatter(y_fmt)
        .x_desc("threads")
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|e| e.to_string())
}

/// Draws the series legend of a chart at `position` (a white, framed box).
pub fn draw_legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// One line of a [`draw_threads_lines`] chart: points `(category, y)`.
pub struct Line {
    /// Legend text.
    pub label: String,
    /// Colour.
    pub colour: RGBColor,
    /// Stroke width (markers grow with it).
    pub width: u32,
    /// The points: x = thread-count category index.
    pub pts: Vec<(f64, f64)>,
}

/// Draws a line chart against thread count (one category per entry of
/// `threads`, the mesh of [`draw_threads_mesh`]) into the PNG at `path`,
/// with the legend at `legend`.
pub fn draw_threads_lines(
    path: &std::path::Path,
    caption: &str,
    threads: &[u32],
    y_desc: &str,
    lines: &[Line],
    legend: SeriesLabelPosition,
) -> Result<(), String> {
    register_font().map_err(|e| e.to_string())?;
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let hi = lines.iter().flat_map(|l| l.pts.iter().map(|p| p.1)).fold(0.0, f64::max);
    let hi = if hi > 0.0 { hi } else { 1.0 };
    let n = threads.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3..n - 0.7, 0.0..hi * 1.45)
        .map_err(|e| e.to_string())?;
    draw_threads_mesh(&mut chart, threads, y_desc, &|v: &f64| fmt_tick(*v))?;
    for l in lines {
        let (c, w) = (l.colour, l.width);
        chart
            .draw_series(LineSeries::new(l.pts.clone(), c.stroke_width(w)))
            .map_err(|e| e.to_string())?
            .label(l.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(w)));
        chart.draw_series(l.pts.iter().map(|&p| Circle::new(p, 1 + w, c.filled()))).map_err(|e| e.to_string())?;
    }
    draw_legend(&mut chart, legend)?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_powers() {
        assert_eq!(fmt_tick(0.0), "0");
        assert_eq!(fmt_tick(1234.0), "1234");
        assert_eq!(fmt_tick(0.1250), "0.125");
        assert_eq!(fmt_tick(2.50), "2.5");
        assert_eq!(power_of_ten(1000.0), "10^3");
        assert_eq!(power_of_ten(1.0), "1");
        assert_eq!(power_of_ten(300.0), "");
        assert_eq!(sorted([3, 1, 3, 2].into_iter()), vec![1, 2, 3]);
    }
}
