//! Progress bars and spinners for long work, drawn on stderr by indicatif.
//! indicatif hides them when stderr is not a terminal, so scripted runs and
//! tests see only the commands' own output.

use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

/// A spinner counting objects: "⠋ checking: 12288 objects walked".
pub fn objects(verb: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    let style = ProgressStyle::with_template("{spinner} {msg}: {pos} objects walked ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    pb.set_style(style);
    pb.set_message(verb.to_string());
    pb.enable_steady_tick(Duration::from_millis(100));
    pb
}

/// A bar over `len` steps: "running regions [=====>    ] 40/100".
pub fn steps(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let style = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb.set_message(what.to_string());
    pb
}
