//! The relay under test, as a process of its own: started from a command template for each
//! round, measured from `/proc` (CPU in nanoseconds and context switches of every thread,
//! resident memory), watched for an early exit, and stopped.
//!
//! The template is a shell-free argument list with placeholders: `{port}` (a free
//! loopback port for the relay's UDP listener), `{fingerprint_file}` (where a relay like
//! ours writes its certificate fingerprint once it listens; the bench waits for it and
//! pins it), and optionally `{http_port}` (a free TCP port for the relay's `/metrics`,
//! which the bench then reads for the driver's I/O counters). A relay that writes no
//! fingerprint file is given `--startup` to come up, and the clients then skip
//! certificate verification.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A relay process. Its stderr goes to a file, whose tail explains an early exit.
#[derive(Debug)]
pub struct RelayProcess {
    child: Mutex<Child>,
    /// Its process id.
    pub pid: u32,
    stderr: PathBuf,
    /// The UDP port it listens on.
    pub port: u16,
    /// The TCP port of its `/metrics`, if the template placed one.
    pub http_port: Option<u16>,
    /// Its certificate's fingerprint, if it wrote one.
    pub fingerprint: Option<String>,
    _scratch: PathBuf,
}

/// A process's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User plus system CPU seconds.
    pub cpu_seconds: f64,
    /// Voluntary context switches, all threads.
    pub voluntary_switches: u64,
    /// Involuntary context switches, all threads.
    pub involuntary_switches: u64,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
}

impl Usage {
    /// What happened between `self` (earlier) and `later`; the memory is `later`'s.
    pub fn until(&self, later: &Usage) -> Usage {
        Usage {
            cpu_seconds: later.cpu_seconds - self.cpu_seconds,
            voluntary_switches: later
                .voluntary_switches
                .saturating_sub(self.voluntary_switches),
            involuntary_switches: later
                .involuntary_switches
                .saturating_sub(self.involuntary_switches),
            rss_bytes: later.rss_bytes,
        }
    }
}

impl RelayProcess {
    /// Starts `template` (see the module docs), waiting up to `startup` for it to listen.
    pub fn start(template: &[String], startup: Duration) -> Result<Self, String> {
        let (program, args) = template.split_first().ok_or("the relay command is empty")?;
        let port = free_port()?;
        let scratch =
            std::env::temp_dir().join(format!("moq-bench-{}-{}", std::process::id(), port));
        std::fs::create_dir_all(&scratch).map_err(|e| format!("creating {scratch:?}: {e}"))?;
        let fingerprint_file = scratch.join("fingerprint");
        let waits_for_file = template
            .iter()
            .any(|arg| arg.contains("{fingerprint_file}"));
        let http_port = if template.iter().any(|arg| arg.contains("{http_port}")) {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            Some(listener.local_addr().map_err(|e| e.to_string())?.port())
        } else {
            None
        };
        let fill = |arg: &String| {
            arg.replace("{port}", &port.to_string())
                .replace("{fingerprint_file}", &fingerprint_file.to_string_lossy())
                .replace("{http_port}", &http_port.unwrap_or(0).to_string())
        };
        let stderr = scratch.join("stderr.log");
        let stderr_file =
            std::fs::File::create(&stderr).map_err(|e| format!("creating {stderr:?}: {e}"))?;
        let child = Command::new(fill(program))
            .args(args.iter().map(fill))
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr_file)
            .spawn()
            .map_err(|e| format!("starting the relay {program:?}: {e}"))?;
        let mut relay = Self {
            pid: child.id(),
            child: Mutex::new(child),
            stderr,
            port,
            http_port,
            fingerprint: None,
            _scratch: scratch,
        };
        let deadline = Instant::now() + startup;
        loop {
            if let Some(status) = relay.exit_status() {
                return Err(relay.exit_report("at start", status));
            }
            if waits_for_file && let Some(text) = read_nonempty(&fingerprint_file) {
                relay.fingerprint = Some(text);
                return Ok(relay);
            }
            if Instant::now() >= deadline {
                if waits_for_file {
                    return Err(format!(
                        "the relay wrote no fingerprint to {} within {startup:?}",
                        fingerprint_file.display()
                    ));
                }
                return Ok(relay);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The relay's counters now.
    pub fn usage(&self) -> Result<Usage, String> {
        usage_of(self.pid)
    }

    /// How the relay exited, if it did.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        child.try_wait().ok().flatten()
    }

    /// Resolves once the relay exits, with what to report: when it exited, its status and
    /// the tail of its stderr. Race it against a round's work so that a relay that dies
    /// fails the round at once.
    pub async fn exited(&self, during: &str) -> String {
        loop {
            if let Some(status) = self.exit_status() {
                return self.exit_report(during, status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// "the relay exited {during} ({status}); its stderr ended with: ...".
    fn exit_report(&self, during: &str, status: ExitStatus) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail_start = lines.len().saturating_sub(STDERR_TAIL_LINES);
        let mut tail = lines[tail_start..].join("\n  ");
        // A panic's message comes before its backtrace, which the tail alone may cut off.
        if let Some(at) = lines[..tail_start]
            .iter()
            .position(|line| line.contains("panicked at"))
        {
            let mut panic: Vec<&str> = lines[at..lines.len().min(at + 3)].to_vec();
            // The frames in the workspace's crates and quiche say where; the rest of a
            // backtrace is the runtime's.
            panic.extend(
                lines[at..tail_start]
                    .iter()
                    .filter(|line| line.contains("moq_") || line.contains("quiche::"))
                    .take(PANIC_FRAMES),
            );
            let panic = panic.join("\n  ");
            tail = format!("{panic}\n  …\n  {tail}");
        }
        if tail.is_empty() {
            format!("the relay exited {during} ({status}) and wrote nothing to stderr")
        } else {
            format!("the relay exited {during} ({status}); its stderr ended with:\n  {tail}")
        }
    }

    /// Stops the relay (SIGTERM, then SIGKILL after 5 s).
    pub fn stop(self) {
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.exit_status().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// How many lines of a dead relay's stderr a report quotes.
const STDERR_TAIL_LINES: usize = 20;

/// How many backtrace frames in the workspace's crates (or quiche) a report quotes from a
/// panic that the tail cut off.
const PANIC_FRAMES: usize = 12;

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Ok(None) = child.try_wait() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self._scratch);
    }
}

/// The counters of process `pid`, from `/proc`. CPU time is the sum over the process's
/// threads of the nanoseconds each spent on a CPU (`/proc/<pid>/task/*/schedstat`): a
/// short round of a relay that does little still shows its cost, where the clock ticks of
/// `/proc/<pid>/stat` (10 ms each) would read zero. Threads that exited take their time
/// with them; the relays measured here keep theirs for the whole run. Without schedstat
/// (a kernel built without it), the ticks are used.
pub fn usage_of(pid: u32) -> Result<Usage, String> {
    let stat_path = format!("/proc/{pid}/stat");
    let stat =
        std::fs::read_to_string(&stat_path).map_err(|e| format!("reading {stat_path}: {e}"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_bytes = status_field(&status, "VmRSS:").unwrap_or(0) * 1024;
    // CPU time and context switches are per thread: sum every thread's.
    let (mut voluntary, mut involuntary) = (0, 0);
    let mut on_cpu_ns: Option<u64> = Some(0);
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            voluntary += status_field(&text, "voluntary_ctxt_switches:").unwrap_or(0);
            involuntary += status_field(&text, "nonvoluntary_ctxt_switches:").unwrap_or(0);
            let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok();
            if schedstat.is_none() && !task.path().exists() {
                // The thread ended since the listing: its time is the process's now
                // (what its siblings' schedstat does not count, `stat` would only
                // approximate), and its absence is no reason to fall back.
                continue;
            }
            on_cpu_ns = match (
                on_cpu_ns,
                schedstat.as_deref().and_then(on_cpu_from_schedstat),
            ) {
                (Some(sum), Some(ns)) => Some(sum + ns),
                _ => None,
            };
        }
    }
    let cpu_seconds = match on_cpu_ns {
        Some(ns) if ns > 0 => ns as f64 / 1e9,
        _ => {
            cpu_seconds_from_stat(&stat).ok_or_else(|| format!("unexpected {stat_path}: {stat}"))?
        }
    };
    Ok(Usage {
        cpu_seconds,
        voluntary_switches: voluntary,
        involuntary_switches: involuntary,
        rss_bytes,
    })
}

/// The first field of a `/proc/<pid>/task/<tid>/schedstat` line: nanoseconds on a CPU.
fn on_cpu_from_schedstat(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

/// utime + stime of a `/proc/<pid>/stat` line, in seconds.
fn cpu_seconds_from_stat(stat: &str) -> Option<f64> {
    // The command name is in parentheses and may hold spaces: count fields after it.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line are the 12th and 13th after `)`.
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / clock_ticks())
}

/// A `Name:   value ...` field of `/proc/<pid>/status`.
fn status_field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
fn clock_ticks() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |ticks| ticks as f64)
}

fn read_nonempty(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// A loopback port free for UDP (the relay) and TCP (an HTTP side on the same port).
pub fn free_port() -> Result<u16, String> {
    for _ in 0..50 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = udp.local_addr().map_err(|e| e.to_string())?.port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err("no loopback port free for both UDP and TCP".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces() {
        let stat = "42 (relay (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        let ticks = clock_ticks();
        assert_eq!(cpu_seconds_from_stat(stat), Some(300.0 / ticks));
        assert_eq!(cpu_seconds_from_stat("garbage"), None);
    }

    #[test]
    fn schedstat_gives_nanoseconds_on_cpu() {
        assert_eq!(
            on_cpu_from_schedstat("123456789 4567 89\n"),
            Some(123_456_789)
        );
        assert_eq!(on_cpu_from_schedstat(""), None);
    }

    #[test]
    fn a_relay_that_dies_is_reported_with_its_status_and_stderr() {
        // A "relay" that writes two lines to stderr and exits with 3 before listening.
        let template: Vec<String> = ["sh", "-c", "echo first >&2; echo 'it broke' >&2; exit 3"]
            .map(String::from)
            .to_vec();
        let error = RelayProcess::start(&template, Duration::from_secs(5)).unwrap_err();
        assert!(error.contains("exit status: 3"), "{error}");
        assert!(
            error.contains("first") && error.contains("it broke"),
            "{error}"
        );
    }

    #[test]
    fn status_fields_are_found_by_name() {
        let status = "Name:\trelay\nVmRSS:\t   2048 kB\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_field(status, "VmRSS:"), Some(2048));
        assert_eq!(status_field(status, "voluntary_ctxt_switches:"), Some(7));
        assert_eq!(status_field(status, "nonvoluntary_ctxt_switches:"), Some(3));
        assert_eq!(status_field(status, "Missing:"), None);
    }

    #[test]
    fn this_process_can_be_measured() {
        // Spend CPU until it shows: at once with nanosecond accounting (schedstat), after
        // a clock tick where only `stat`'s ticks are there. However slow the machine, the
        // count grows, so the loop ends; a reader that never sees it fails here.
        let mut usage = usage_of(std::process::id()).unwrap();
        let mut x = 0u64;
        for round in 0u64..10_000 {
            if usage.cpu_seconds > 0.0 {
                break;
            }
            for i in 0..1_000_000u64 {
                x = x
                    .wrapping_mul(31)
                    .wrapping_add(std::hint::black_box(i ^ round));
            }
            usage = usage_of(std::process::id()).unwrap();
        }
        std::hint::black_box(x);
        assert!(usage.rss_bytes > 0);
        assert!(usage.cpu_seconds > 0.0);
        let later = Usage {
            cpu_seconds: usage.cpu_seconds + 1.0,
            voluntary_switches: usage.voluntary_switches + 2,
            ..usage
        };
        let delta = usage.until(&later);
        assert!((delta.cpu_seconds - 1.0).abs() < 1e-9);
        assert_eq!(delta.voluntary_switches, 2);
    }
}
