//! The process's own figures in the Prometheus client conventions (`process_*`: CPU, memory,
//! file descriptors, start time) and `moq_relay_build_info`, read from `/proc` at scrape
//! time. Written by hand: the `/proc` reads are a few lines, and the `prometheus` crate's
//! `process` feature would bring a registry the relay's hand-rendered metrics do not use.
//! Where `/proc` is missing (not Linux), the `process_*` lines are left out.

use std::fmt::Write;

/// The relay's version, from its Cargo.toml.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit it was built from (`build.rs`: `MOQ_BUILD_COMMIT`, else git, else
/// `unknown`).
const COMMIT: &str = env!("MOQ_BUILD_COMMIT");

/// Appends the `process_*` families and `moq_relay_build_info` to `out`.
pub(crate) fn render(out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP moq_relay_build_info The relay's version and the commit it was built from.\n\
         # TYPE moq_relay_build_info gauge\n\
         moq_relay_build_info{{version=\"{VERSION}\",commit=\"{COMMIT}\"}} 1"
    );
    let Some(process) = Process::read() else {
        return;
    };
    let mut family = |name: &str, kind: &str, help: &str, value: String| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    family(
        "process_cpu_seconds_total",
        "counter",
        "User and system CPU time spent, in seconds.",
        format!("{:.2}", process.cpu_seconds),
    );
    family(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size, in bytes.",
        process.resident_bytes.to_string(),
    );
    family(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size, in bytes.",
        process.virtual_bytes.to_string(),
    );
    family(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since the Unix epoch, in seconds.",
        format!("{:.2}", process.start_time_seconds),
    );
    if let Some(open) = process.open_fds {
        family(
            "process_open_fds",
            "gauge",
            "Open file descriptors.",
            open.to_string(),
        );
    }
    if let Some(max) = process.max_fds {
        family(
            "process_max_fds",
            "gauge",
            "The most file descriptors the process may open.",
            max.to_string(),
        );
    }
}

/// What `/proc/self` says.
#[derive(Debug, Clone, PartialEq)]
struct Process {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    start_time_seconds: f64,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
}

impl Process {
    fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|ticks| *ticks > 0)? as f64;
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .filter(|page| *page > 0)? as u64;
        let fields = StatFields::parse(&stat)?;
        let boot_seconds: f64 = boot
            .lines()
            .find_map(|line| line.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|entries| entries.count() as u64);
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|limits| max_open_files(&limits));
        Some(Self {
            cpu_seconds: (fields.utime + fields.stime) as f64 / ticks,
            resident_bytes: fields.rss_pages.saturating_mul(page),
            virtual_bytes: fields.vsize,
            start_time_seconds: boot_seconds + fields.starttime as f64 / ticks,
            open_fds,
            max_fds,
        })
    }
}

/// The fields of `/proc/self/stat` that matter here (proc(5)).
#[derive(Debug, PartialEq, Eq)]
struct StatFields {
    utime: u64,
    stime: u64,
    starttime: u64,
    vsize: u64,
    rss_pages: u64,
}

impl StatFields {
    /// Parses the line; the command name (field 2) may hold spaces and parentheses, so the
    /// fields are counted from its last `)`.
    fn parse(stat: &str) -> Option<Self> {
        let rest = &stat[stat.rfind(')')? + 1..];
        // Field 3 (state) is the first after the name.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |number: usize| -> Option<u64> { fields.get(number - 3)?.parse().ok() };
        Some(Self {
            utime: field(14)?,
            stime: field(15)?,
            starttime: field(22)?,
            vsize: field(23)?,
            rss_pages: field(24)?,
        })
    }
}

/// The soft limit on open files from `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_line_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (moq relay) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 8 0 123456 987654321 2048 18446744073709551615";
        let fields = StatFields::parse(line).unwrap();
        assert_eq!(
            fields,
            StatFields {
                utime: 250,
                stime: 50,
                starttime: 123456,
                vsize: 987654321,
                rss_pages: 2048,
            }
        );
        assert_eq!(StatFields::parse("no parenthesis"), None);
    }

    #[test]
    fn this_process_has_figures_and_the_text_has_every_family() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        let process = Process::read().expect("Linux has /proc");
        assert!(process.resident_bytes > 0);
        assert!(process.open_fds.unwrap() > 0);
        let mut text = String::new();
        render(&mut text);
        for family in [
            "moq_relay_build_info{version=",
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_start_time_seconds ",
            "process_open_fds ",
            "process_max_fds ",
        ] {
            assert!(
                text.contains(&format!("\n{family}")) || text.starts_with(family),
                "{family} in {text}"
            );
        }
    }
}
