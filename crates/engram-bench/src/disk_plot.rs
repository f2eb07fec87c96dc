//! The chart of `engram-bench disk` (`disk.png`): durable commits per
//! second against threads, one line per system (Engram regions in msync and
//! wal mode, the PSTM in wal mode, SQLite, LMDB).

use crate::chart::{draw_legend, draw_threads_mesh, fmt_tick, register_font};
use crate::disk::{Cell, SYSTEMS};
use plotters::prelude::*;
use std::path::Path;

const COLOURS: [RGBColor; 5] = [
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x7f, 0x0e),
];

/// Draws `cells` into the PNG at `path`.
pub fn draw(cells: &[Cell], threads: &[u32], path: &Path) -> Result<(), String> {
    register_font().map_err(|e| e.to_string())?;
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let hi = cells.iter().map(Cell::rate).fold(0.0, f64::max).max(1.0);
    let n = threads.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("Durable commits per second on the disk (two-account transfer; higher is better)", ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3..n - 0.7, 0.0..hi * 1.45)
        .map_err(|e| e.to_string())?;
    draw_threads_mesh(&mut chart, threads, "commits/s", &|v: &f64| fmt_tick(*v))?;
    for (sys, name) in SYSTEMS.iter().enumerate() {
        let pts: Vec<(f64, f64)> = threads
            .iter()
            .enumerate()
            .filter_map(|(i, &t)| cells.iter().find(|c| c.system == sys && c.threads == t).map(|c| (i as f64, c.rate())))
            .collect();
        let c = COLOURS[sys % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
            .map_err(|e| e.to_string())?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(|e| e.to_string())?;
    }
    draw_legend(&mut chart)?;
    root.present().map_err(|e| e.to_string())
}
