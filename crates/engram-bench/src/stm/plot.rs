//! PNG charts of an STM benchmark run:
//!
//! - `stm-throughput.png`: tx/s against threads, one panel per structure
//!   and lookup share, one line per implementation;
//! - `stm-slowdown.png`: PSTM's slowdown against its no-flush run
//!   (no-flush tx/s ÷ PSTM tx/s) per structure and lookup share, one bar
//!   per thread count, with the paper's 1.3×–2.8× band;
//! - `stm-vs-pmdk.png`: PSTM tx/s ÷ PMDK tx/s, same layout.
//!
//! Fonts as in the region benchmarks' `plot.rs` (DejaVu Sans read at run
//! time by ab_glyph); without a font the plots are skipped with an error
//! and the rest of the report is still written.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::report::{fmt_txps, over_pmdk, slowdown, Point, Row};
use super::workload::{Impl, Structure};
use crate::chart::{colour, draw_err, draw_threads_mesh, register_font, sorted, PlotError};

fn color(imp: Impl) -> RGBColor {
    match imp {
        Impl::Pstm => colour::ENGRAM,
        Impl::PstmProcess => colour::ENGRAM_PROCESS,
        Impl::Tvar => colour::VOLATILE,
        Impl::Pmdk => colour::PMDK,
        Impl::Romulus => colour::PEER_TM,
        Impl::Onefile => colour::PEER_TM_2,
    }
}

/// Bar colours by thread count, light to dark.
fn thread_color(i: usize) -> RGBColor {
    const C: [RGBColor; 6] = [
        RGBColor(0x9e, 0xca, 0xe1),
        RGBColor(0x42, 0x92, 0xc6),
        RGBColor(0x21, 0x71, 0xb5),
        RGBColor(0x08, 0x45, 0x94),
        RGBColor(0x08, 0x30, 0x6b),
        RGBColor(0x03, 0x13, 0x3a),
    ];
    C[i.min(C.len() - 1)]
}

/// Draws every chart into `dir`; returns the file names written.
pub fn draw_all(rows: &[Row], dir: &Path) -> Result<Vec<String>, PlotError> {
    register_font()?;
    let mut written = Vec::new();
    if !rows.is_empty() {
        let file = "stm-throughput.png";
        throughput_chart(rows, &dir.join(file)).map_err(draw_err(file))?;
        written.push(file.to_string());
    }
    let threads = sorted(rows.iter().map(|r| r.point.threads));
    let groups = |f: &dyn Fn(Point) -> Option<f64>| -> Vec<(String, Vec<(u32, f64)>)> {
        let mut out = Vec::new();
        for s in sorted(rows.iter().map(|r| r.point.structure)) {
            for l in sorted(rows.iter().filter(|r| r.point.structure == s).map(|r| r.point.lookup_pct)) {
                let bars: Vec<(u32, f64)> =
                    threads.iter().filter_map(|&t| f(Point { structure: s, lookup_pct: l, threads: t }).map(|v| (t, v))).collect();
                if !bars.is_empty() {
                    out.push((format!("{} {l}%", short(s)), bars));
                }
            }
        }
        out
    };
    let slow = groups(&|p| slowdown(rows, p));
    if !slow.is_empty() {
        let file = "stm-slowdown.png";
        let title = "PSTM slowdown from persistence: no-flush tx/s ÷ PSTM tx/s (paper: 1.3×–2.8× vs volatile STM)";
        let refs = [(1.3, "paper's range vs volatile STM: 1.3×"), (2.8, "2.8×")];
        bar_chart(&dir.join(file), title, "slowdown (×)", &slow, &threads, &refs).map_err(draw_err(file))?;
        written.push(file.to_string());
    }
    let pmdk = groups(&|p| over_pmdk(rows, p));
    if !pmdk.is_empty() {
        let file = "stm-vs-pmdk.png";
        let title = "PSTM tx/s ÷ PMDK tx/s (above 1: PSTM faster; PMDK serialises on a global lock)";
        bar_chart(&dir.join(file), title, "PSTM ÷ PMDK (×)", &pmdk, &threads, &[]).map_err(draw_err(file))?;
        written.push(file.to_string());
    }
    Ok(written)
}

fn short(s: Structure) -> &'static str {
    match s {
        Structure::Rbtree => "rb-tree",
        Structure::Treap => "treap",
        Structure::Hashtable => "hash",
        Structure::Hamt => "HAMT",
    }
}

fn throughput_chart(rows: &[Row], path: &Path) -> Result<(), String> {
    let structures = sorted(rows.iter().map(|r| r.point.structure));
    let lookups = sorted(rows.iter().map(|r| r.point.lookup_pct));
    let (w, h) = (480 * structures.len().max(1) as u32, 420 * lookups.len().max(1) as u32 + 50);
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(
            "STM benchmark: committed transactions per second (higher is better; 2 cores, 4 and 8 threads oversubscribed)",
            ("sans-serif", 24),
        )
        .map_err(|e| e.to_string())?;
    let areas = root.split_evenly((lookups.len().max(1), structures.len().max(1)));
    let mut k = 0;
    for &l in &lookups {
        for &s in &structures {
            let panel: Vec<&Row> = rows.iter().filter(|r| r.point.structure == s && r.point.lookup_pct == l).collect();
            throughput_panel(&areas[k], &panel, &format!("{} — {l} % lookups", s.label()))?;
            k += 1;
        }
    }
    root.present().map_err(|e| e.to_string())
}

fn throughput_panel(area: &DrawingArea<BitMapBackend<'_>, Shift>, rows: &[&Row], caption: &str) -> Result<(), String> {
    let threads = sorted(rows.iter().map(|r| r.point.threads));
    let x_of = |t: u32| threads.iter().position(|&x| x == t).unwrap_or(0) as f64;
    let hi = rows.iter().map(|r| r.txps).fold(0.0, f64::max).max(1.0);
    let n = threads.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        // Headroom above the highest point for the legend.
        .build_cartesian_2d(-0.3..n - 0.7, 0.0..hi * 1.6)
        .map_err(|e| e.to_string())?;
    draw_threads_mesh(&mut chart, &threads, "tx/s", &|v: &f64| fmt_txps(*v))?;
    for imp in Impl::ALL {
        let pts: Vec<(f64, f64)> =
            threads.iter().filter_map(|&t| rows.iter().find(|r| r.imp == imp && r.point.threads == t).map(|r| (x_of(t), r.txps))).collect();
        if pts.is_empty() {
            continue;
        }
        let c = color(imp);
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
            .map_err(|e| e.to_string())?
            .label(imp.label())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// Grouped bars: one group per label, one bar per thread count.
fn bar_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[(String, Vec<(u32, f64)>)],
    threads: &[u32],
    refs: &[(f64, &str)],
) -> Result<(), String> {
    let root = BitMapBackend::new(path, (1500, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(|e| e.to_string())?;
    let hi = groups.iter().flat_map(|g| g.1.iter().map(|b| b.1)).chain(refs.iter().map(|r| r.0)).fold(1.0, f64::max);
    let ng = groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..ng - 0.5, 0.0..hi * 1.2)
        .map_err(|e| e.to_string())?;
    let labels: Vec<String> = groups.iter().map(|g| g.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Twice as many label slots as groups: the step is then 1 or 0.5,
        // so every group centre (an integer) gets a slot; the others stay
        // empty.
        .x_labels(2 * labels.len().max(1))
        .x_label_formatter(&|v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .y_label_formatter(&|v: &f64| format!("{v:.1}"))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|e| e.to_string())?;
    let k = threads.len().max(1) as f64;
    let w = 0.8 / k;
    for (ti, &t) in threads.iter().enumerate() {
        let c = thread_color(ti + (6 - threads.len().min(6)) / 2);
        let bars: Vec<(f64, f64)> = groups
            .iter()
            .enumerate()
            .filter_map(|(g, (_, bs))| bs.iter().find(|b| b.0 == t).map(|b| (g as f64 - 0.4 + w * ti as f64, b.1)))
            .collect();
        chart
            .draw_series(bars.iter().map(|&(x, v)| Rectangle::new([(x + 0.01, 0.0), (x + w - 0.01, v)], c.filled())))
            .map_err(|e| e.to_string())?
            .label(format!("{t} thread{}", if t == 1 { "" } else { "s" }))
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled()));
        chart
            .draw_series(bars.iter().map(|&(x, v)| {
                let style = TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
                Text::new(format!("{v:.2}"), (x + w / 2.0, v), style)
            }))
            .map_err(|e| e.to_string())?;
    }
    chart.draw_series(LineSeries::new(vec![(-0.5, 1.0), (ng - 0.5, 1.0)], BLACK.stroke_width(2))).map_err(|e| e.to_string())?;
    if !refs.is_empty() {
        let c = RGBColor(0xd6, 0x27, 0x28);
        let label = refs.iter().map(|r| r.1).collect::<Vec<_>>().join(", ");
        for (i, &(v, _)) in refs.iter().enumerate() {
            let s = chart.draw_series(LineSeries::new(vec![(-0.5, v), (ng - 0.5, v)], c.stroke_width(2))).map_err(|e| e.to_string())?;
            if i == 0 {
                s.label(label.clone()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
