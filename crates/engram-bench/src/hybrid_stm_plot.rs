//! The charts of `engram-bench hybrid`'s STM section
//! (`hybrid-stm-<structure>.png`): Mops/s against threads for one
//! structure, one line per runtime and layout (colour = runtime; thick
//! solid = embedded fields, thin = one TVar per field).

use crate::chart::{draw_threads_mesh, fmt_tick, register_font};
use crate::hybrid_stm::{Point, LAYOUTS, STRUCTURES};
use engram::stm::runtime::Runtime;
use plotters::prelude::*;
use std::path::Path;

const COLOURS: [RGBColor; 5] = [
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
];

/// Draws the points of structure `si` into the PNG at `path`.
pub fn draw(points: &[Point], si: usize, threads: &[u32], path: &Path) -> Result<(), String> {
    register_font().map_err(|e| e.to_string())?;
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mine: Vec<&Point> = points.iter().filter(|p| p.structure == si).collect();
    let hi = mine.iter().map(|p| p.rate / 1e6).fold(0.0, f64::max).max(1e-3);
    let n = threads.len().max(1) as f64;
    let caption = format!("{}: 90:5:5, 50,000 of 100,000 keys (Mops/s; higher is better)", STRUCTURES[si]);
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3..n - 0.7, 0.0..hi * 1.45)
        .map_err(|e| e.to_string())?;
    draw_threads_mesh(&mut chart, threads, "Mops/s", &|v: &f64| fmt_tick(*v))?;
    for (ri, &rt) in Runtime::ALL.iter().enumerate() {
        for (li, layout) in LAYOUTS.iter().enumerate() {
            let pts: Vec<(f64, f64)> = threads
                .iter()
                .enumerate()
                .filter_map(|(i, &t)| {
                    mine.iter().find(|p| p.rt == rt && p.layout == li && p.threads == t).map(|p| (i as f64, p.rate / 1e6))
                })
                .collect();
            let c = COLOURS[ri % COLOURS.len()];
            let w = if li == 1 { 3 } else { 1 };
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(w)))
                .map_err(|e| e.to_string())?
                .label(format!("{} / {layout}", rt.name()))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(w)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 2 + w, c.filled()))).map_err(|e| e.to_string())?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
