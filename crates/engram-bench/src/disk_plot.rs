//! The chart of `engram-bench disk` (`disk.png`): durable commits per
//! second against threads, one line per system (Engram regions in msync and
//! wal mode, the PSTM in wal mode, SQLite, LMDB).

use crate::chart::{draw_threads_lines, Line};
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
    let lines: Vec<Line> = SYSTEMS
        .iter()
        .enumerate()
        .map(|(sys, name)| Line {
            label: name.to_string(),
            colour: COLOURS[sys % COLOURS.len()],
            width: 3,
            pts: threads
                .iter()
                .enumerate()
                .filter_map(|(i, &t)| cells.iter().find(|c| c.system == sys && c.threads == t).map(|c| (i as f64, c.rate())))
                .collect(),
        })
        .collect();
    let caption = "Durable commits per second on the disk (two-account transfer; higher is better)";
    draw_threads_lines(path, caption, threads, "commits/s", &lines, SeriesLabelPosition::UpperLeft)
}
