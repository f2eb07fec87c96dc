//! The `engram` command, as a library so that its tests can share the
//! workloads' persistent types and invariant checks.
//!
//! Every command is a thin wrapper over the engine's public API ([`engram`]):
//! the CLI never parses pool bytes itself. Commands that only look at a pool
//! (`info`, `check`) open it read-only, so recovery of a crashed pool runs on
//! a private copy-on-write mapping and the file is left exactly as it was;
//! commands that change it (`create`, `gc`, `check --repair`, `demo`, `torture`) open it
//! read-write and close it cleanly when they finish.
//!
//! Errors are one [`CliError`] value per failure, printed by `main` as one
//! line, `engram: <message>`, with exit status 1; usage errors are clap's
//! (exit status 2). Nothing here panics on a bad file: every engine failure
//! arrives as an [`engram::Error`].

pub mod args;
pub mod check;
pub mod crashtest;
pub mod demo;
mod error;
pub mod inspect;
mod progress;
pub mod size;
pub mod torture;

pub use error::CliError;

/// Runs one parsed command line.
pub fn run(cli: args::Cli) -> Result<(), CliError> {
    use args::Command;
    match cli.command {
        Command::Create(a) => inspect::create(&a),
        Command::Info(a) => inspect::info(&a.path, a.json),
        Command::Check(a) => check::check(&a.path, a.repair, a.yes),
        Command::Gc(a) => inspect::gc(&a.path),
        Command::Demo(a) => demo::run(&a),
        Command::Crashtest(a) => crashtest::run(&a),
        Command::Torture(a) => torture::run(&a.path, a.seed, a.durability.map(Into::into), a.regions),
    }
}
