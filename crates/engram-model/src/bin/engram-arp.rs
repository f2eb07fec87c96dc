//! `engram-arp`: the acquire-release persistency tools from the command line.
//!
//! ```text
//! engram-arp record <bench> [--ops N] [--seed S] [--mutation none|missing-release|release-volatile]
//!                   [--variant logged|paper-like]
//!                                       write the workload's trace (text format) to stdout;
//!                                       the seed fixes the schedule too (same seed, same trace)
//! engram-arp sim <trace>                persists per epoch, simulated time, page misses per model
//! engram-arp check <trace> [<bench>] [--model M] [--images N]
//!                                       crash images the model allows; with a workload name,
//!                                       run its recovery and invariant on each
//! engram-arp report [--ops N]           Table 5, Table 2, Figure 4/5 and the checker, as Markdown
//! ```
//!
//! Exit status: 0 on success, 1 on bad usage or unreadable input, 2 when the
//! checker found violations.

use engram_model::arp::check::CheckConfig;
use engram_model::arp::eval;
use engram_model::arp::sim::{simulate, SimModel, Timing};
use engram_model::arp::workloads::history::History;
use engram_model::arp::workloads::record::Mutation;
use engram_model::arp::workloads::{check_image_durable, record, Bench, Params, Variant};
use engram_model::arp::{check, ArpTrace, Model};
use std::process::ExitCode;

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn num(args: &[String], name: &str, default: usize) -> Result<usize, String> {
    flag(args, name).map(|v| v.parse().map_err(|_| format!("{name}: not a number: {v}"))).unwrap_or(Ok(default))
}

fn read_trace(path: &str) -> Result<ArpTrace, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    ArpTrace::parse(&text).map_err(|e| format!("{path}: {e}"))
}

fn params(args: &[String]) -> Result<Params, String> {
    let d = Params::default();
    Ok(Params {
        ops: num(args, "--ops", d.ops)?,
        antagonist_ops: num(args, "--ops", d.antagonist_ops)?,
        seed: num(args, "--seed", 1)? as u64,
        variant: match flag(args, "--variant").as_deref() {
            None | Some("logged") => Variant::Logged,
            Some("paper-like") => Variant::PaperLike,
            Some(v) => return Err(format!("--variant: logged or paper-like, not {v}")),
        },
        ..d
    })
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    match args.first().map(String::as_str) {
        Some("record") => {
            let b = args.get(1).and_then(|s| Bench::parse(s)).ok_or("record: name a workload: cq pc sps TATP TPCC YCSB_A")?;
            let mutation = match flag(args, "--mutation").as_deref() {
                None | Some("none") => Mutation::None,
                Some("missing-release") => Mutation::MissingRelease,
                Some("release-volatile") => Mutation::ReleaseMarkedVolatile,
                Some(m) => return Err(format!("unknown mutation {m}")),
            };
            print!("{}", record(b, &params(args)?, mutation).to_text());
            Ok(ExitCode::SUCCESS)
        }
        Some("sim") => {
            let t = read_trace(args.get(1).ok_or("sim: name a trace file")?)?;
            println!("{:<9} {:>16} {:>14} {:>10}", "model", "persists/epoch", "time (us)", "page miss");
            for m in SimModel::ALL {
                let r = simulate(&t, m, &Timing::default());
                println!(
                    "{:<9} {:>16.2} {:>14.1} {:>9.1}%",
                    m.name(),
                    r.persists_per_epoch,
                    r.time_ns as f64 / 1000.0,
                    100.0 * r.page_miss_rate
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("check") => {
            let t = read_trace(args.get(1).ok_or("check: name a trace file")?)?;
            let bench =
                args.get(2).filter(|s| !s.starts_with("--")).map(|s| Bench::parse(s).ok_or(format!("unknown workload {s}"))).transpose()?;
            let models = match flag(args, "--model") {
                Some(m) => vec![Model::parse(&m).ok_or(format!("unknown model {m}"))?],
                None => Model::ALL.to_vec(),
            };
            let cfg = CheckConfig { max_images: num(args, "--images", 2048)?, ..CheckConfig::default() };
            let p = params(args)?;
            let h = History::from_trace(&t);
            let mut bad = false;
            for m in models {
                let r = check(&t, m, &cfg, &mut |img| bench.map_or(Ok(()), |b| check_image_durable(b, &p, &h, img)));
                println!("{r}");
                for v in &r.violations {
                    println!("  crash after event {:?}: {}\n    lost: {}", v.after_event, v.message, v.lost);
                }
                bad |= !r.violations.is_empty();
            }
            Ok(if bad { ExitCode::from(2) } else { ExitCode::SUCCESS })
        }
        Some("report") => {
            let rows = eval::evaluate(&params(args)?, &CheckConfig::default(), &Timing::default());
            println!("## Table 5: persists per epoch\n\n{}", eval::table5(&rows));
            println!("## Table 2: gains in persists per epoch\n\n{}", eval::table2(&rows));
            println!("## Figures 4 and 5: simulated time (normalised to SCP) and page-miss rate\n\n{}", eval::figure4(&rows));
            println!("## Checker\n\n{}", eval::checks(&rows));
            Ok(ExitCode::SUCCESS)
        }
        _ => Err("usage: engram-arp record|sim|check|report ... (see the source's header)".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    run(&args).unwrap_or_else(|e| {
        eprintln!("engram-arp: {e}");
        ExitCode::from(1)
    })
}
