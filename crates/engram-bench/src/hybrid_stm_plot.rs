//! The charts of `engram-bench hybrid`'s STM section
//! (`hybrid-stm-<structure>.png`): Mops/s against threads for one
//! structure, one line per runtime and layout (colour = runtime; thick
//! solid = embedded fields, thin = one TVar per field).

use crate::chart::{draw_threads_lines, Line};
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
    let mut lines = Vec::new();
    for (ri, &rt) in Runtime::ALL.iter().enumerate() {
        for (li, layout) in LAYOUTS.iter().enumerate() {
            let pts = threads
                .iter()
                .enumerate()
                .filter_map(|(i, &t)| {
                    let p = points.iter().find(|p| p.structure == si && p.rt == rt && p.layout == li && p.threads == t)?;
                    Some((i as f64, p.rate / 1e6))
                })
                .collect();
            let (colour, width) = (COLOURS[ri % COLOURS.len()], if li == 1 { 3 } else { 1 });
            lines.push(Line { label: format!("{} / {layout}", rt.name()), colour, width, pts });
        }
    }
    let caption = format!("{}: 90:5:5, 50,000 of 100,000 keys (Mops/s; higher is better)", STRUCTURES[si]);
    draw_threads_lines(path, &caption, threads, "Mops/s", &lines, SeriesLabelPosition::UpperRight)
}
