//! The configuration a benchmark run prints first and writes into its
//! report: the machine, the file systems of the pool directories, the PMDK
//! version, Engram's flush instruction.
//!
//! Everything here is best effort: a fact that cannot be found is reported
//! as `unknown`, never as an error, so a missing tool never stops a run.

use std::path::Path;
use std::process::Command;

/// Facts about the machine and the software under test.
#[derive(Clone, Debug)]
pub struct Machine {
    /// CPU model name from /proc/cpuinfo.
    pub cpu: String,
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// libpmemobj version (pkg-config, else dpkg).
    pub pmdk: String,
    /// Engram's cache-line write-back instruction in `pmem` mode.
    pub flush_instr: &'static str,
    /// Whether `PMEM_IS_PMEM_FORCE` is set in this process's environment
    /// (the runner sets or clears it per child regardless).
    pub pmem_force_env: Option<String>,
    /// When the run started (UTC).
    pub date: String,
}

/// The 1-minute load average (/proc/loadavg), if readable: other work on
/// the machine while a run measures makes its times noisy.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Output of a command, trimmed, if it ran and succeeded.
fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

/// The features detected at run time that change what the benchmarks
/// measure (the machines here differ from one session to the next), shown
/// after the CPU's model: the flush instruction Engram uses (`flush`, from
/// `engram::pmem::FlushInstr::detect`), `avx512f`, and `rtm` where
/// transactions commit (engram's probe; CPUID's bit alone reads
/// `rtm-disabled`).
fn cpu_features(flush: &'static str) -> Vec<&'static str> {
    let mut f = vec![flush];
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            f.push("avx512f");
        }
        let probe = engram::htm::rtm::probe();
        if probe.usable() {
            f.push("rtm");
        } else if probe.cpuid {
            f.push("rtm-disabled");
        }
    }
    f
}

fn pmdk_version() -> String {
    command_output("pkg-config", &["--modversion", "libpmemobj"])
        .or_else(|| command_output("dpkg-query", &["-W", "-f=${Version}", "libpmemobj1"]))
        .unwrap_or_else(|| "unknown".into())
}

/// The file system a directory lives on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsInfo {
    /// Its type: `tmpfs`, `ext4`, ... (from the mount table; else as
    /// `stat -f -c %T` names it, which says `ext2/ext3` for ext4 too).
    pub kind: String,
    /// What is mounted there (`/dev/vda`, `tmpfs`), if known.
    pub source: Option<String>,
}

/// Undoes the octal escapes (`\040` for a space) of /proc/self/mounts.
fn unescape_mount(field: &str) -> String {
    let mut out = String::new();
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4).and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// (type, source) of the mount holding `dir`: the longest mount point
/// that is a prefix of its canonical path.
fn mount_of(dir: &Path) -> Option<(String, String)> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let table = std::fs::read_to_string("/proc/self/mounts").ok()?;
    table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3).then(|| (unescape_mount(f[1]), f[2].to_string(), unescape_mount(f[0])))
        })
        .filter(|(point, _, _)| dir.starts_with(point))
        .max_by_key(|(point, _, _)| point.len())
        .map(|(_, kind, source)| (kind, source))
}

/// The file system of `dir`.
pub fn fs_info(dir: &Path) -> FsInfo {
    if let Some((kind, source)) = mount_of(dir) {
        return FsInfo { kind, source: Some(source) };
    }
    let d = dir.to_string_lossy();
    let kind = command_output("stat", &["-f", "-c", "%T", &d]).unwrap_or_else(|| "unknown".into());
    FsInfo { kind, source: None }
}

impl Machine {
    /// Looks everything up.
    pub fn detect() -> Self {
        let flush_instr = engram::pmem::FlushInstr::detect().name();
        Machine {
            cpu: format!("{} [{}]", cpu_model(), cpu_features(flush_instr).join(" ")),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: command_output("uname", &["-r"]).unwrap_or_else(|| "unknown".into()),
            pmdk: pmdk_version(),
            flush_instr,
            pmem_force_env: std::env::var(crate::job::PMEM_FORCE_VAR).ok(),
            date: command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "unknown".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(unescape_mount("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_mount("/plain"), "/plain");
    }

    #[test]
    fn root_has_a_file_system() {
        assert_ne!(fs_info(Path::new("/")).kind, "");
    }
}
