//! `engram`: the command-line tool. Parsing is clap's; every command lives in
//! the `engram_cli` library. Failures print one line, `engram: <message>`,
//! on stderr and exit 1 (2 for usage errors, as clap does).

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = engram_cli::args::Cli::parse();
    match engram_cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("engram: {e}");
            ExitCode::from(e.exit_status())
        }
    }
}

/// Rust ignores SIGPIPE, which turns `engram info p | head -1` into a panic
/// on the next print; a command-line tool should just stop, as `cat` does.
fn restore_sigpipe() {
    // SAFETY: resetting a signal disposition to its default before any
    // thread is started; no handler code is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}
