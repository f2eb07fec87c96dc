//! The charts of `engram-bench hybrid`'s prototype section
//! (`hybrid-proto-<n>.png`, one per 90:5:5 table): commits per second
//! against threads, one line per mode (hybrid-lazy, hybrid-early,
//! htm-commit, coarse).
//!
//! Invariants: a missing point is left out of its line, never drawn as 0.
//! Crash behaviour: none (writes a PNG; an error is reported, not fatal).

use crate::chart::{draw_threads_lines, Line};
use plotters::prelude::*;
use std::path::Path;

const COLOURS: [RGBColor; 4] =
    [RGBColor(0x2c, 0xa0, 0x2c), RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xd6, 0x27, 0x28), RGBColor(0x94, 0x67, 0xbd)];

/// Draws one table's points — `(mode, threads, commits/s)` — into `path`.
pub fn draw(title: &str, modes: &[&str], threads: &[u32], points: &[(usize, u32, f64)], path: &Path) -> Result<(), String> {
    let lines: Vec<Line> = modes
        .iter()
        .enumerate()
        .map(|(mi, name)| Line {
            label: (*name).to_string(),
            colour: COLOURS[mi % COLOURS.len()],
            width: 2,
            pts: threads
                .iter()
                .enumerate()
                .filter_map(|(i, &t)| points.iter().find(|p| p.0 == mi && p.1 == t).map(|p| (i as f64, p.2 / 1e6)))
                .collect(),
        })
        .collect();
    let caption = format!("{title} (M commits/s; higher is better)");
    draw_threads_lines(path, &caption, threads, "M commits/s", &lines, SeriesLabelPosition::UpperRight)
}
