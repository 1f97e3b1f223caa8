//! What the relay's I/O cost in the measured window: its system calls (counted by
//! `perf stat` on the `raw_syscalls:sys_enter` tracepoint, where perf is installed and
//! allowed) and its driver's counters from `/metrics` (receive and send operations,
//! datagrams each way), where the relay serves HTTP (`{http_port}` in its command).
//!
//! Per delivery, these are what the driver ablation compares: a driver that batches more
//! datagrams per operation, or more operations per system call, spends fewer system calls
//! on each delivered frame.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The driver's I/O counters, summed over its workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverCounters {
    /// Datagrams received.
    pub datagrams_received: u64,
    /// Receive operations that returned datagrams.
    pub receive_calls: u64,
    /// Datagrams sent.
    pub datagrams_sent: u64,
    /// Send operations.
    pub send_calls: u64,
    /// Send operations the kernel refused (0 from a relay that does not count them).
    pub send_errors: u64,
    /// Times the workers waited for work (0 from a relay or driver that does not count
    /// them).
    pub parks: u64,
}

/// The relay's I/O over a measured window, per delivery and per operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayIo {
    /// System calls per delivery (`None` without perf).
    pub syscalls_per_delivery: Option<f64>,
    /// Send operations per delivery.
    pub send_calls_per_delivery: f64,
    /// Receive operations per delivery.
    pub receive_calls_per_delivery: f64,
    /// Datagrams per send operation.
    pub datagrams_per_send: f64,
    /// Datagrams per receive operation.
    pub datagrams_per_receive: f64,
    /// Send operations the kernel refused in the window (`moq_relay_send_errors_total`;
    /// 0 from a relay that does not count them).
    #[serde(default)]
    pub send_errors: u64,
    /// Datagrams received per time a worker waited for work: what one wake-up handled
    /// (`None` from a relay or driver that does not count its parks).
    #[serde(default)]
    pub datagrams_per_park: Option<f64>,
}

impl RelayIo {
    /// The window's figures from the counters at its start and end, and the system calls
    /// counted over it.
    pub fn of(
        before: DriverCounters,
        after: DriverCounters,
        syscalls: Option<u64>,
        delivered: u64,
    ) -> Self {
        let per = |count: u64, by: u64| count as f64 / by.max(1) as f64;
        let sends = after.send_calls.saturating_sub(before.send_calls);
        let receives = after.receive_calls.saturating_sub(before.receive_calls);
        Self {
            syscalls_per_delivery: syscalls.map(|calls| per(calls, delivered)),
            send_calls_per_delivery: per(sends, delivered),
            receive_calls_per_delivery: per(receives, delivered),
            datagrams_per_send: per(
                after.datagrams_sent.saturating_sub(before.datagrams_sent),
                sends,
            ),
            datagrams_per_receive: per(
                after
                    .datagrams_received
                    .saturating_sub(before.datagrams_received),
                receives,
            ),
            send_errors: after.send_errors.saturating_sub(before.send_errors),
            datagrams_per_park: match after.parks.saturating_sub(before.parks) {
                0 => None,
                parks => Some(per(
                    after
                        .datagrams_received
                        .saturating_sub(before.datagrams_received),
                    parks,
                )),
            },
        }
    }
}

/// Reads the driver's counters from the relay's `/metrics` on `port`.
pub fn driver_counters(port: u16) -> Result<DriverCounters, String> {
    Ok(parse_metrics(&metrics_page(port)?))
}

/// The value of the unlabelled metric `name` on the relay's `/metrics` on `port`.
pub fn metric(port: u16, name: &str) -> Result<u64, String> {
    let page = metrics_page(port)?;
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| format!("no {name} in /metrics"))
}

/// The relay's `/metrics` page on `port`.
fn metrics_page(port: u16) -> Result<String, String> {
    http_get(port, "/metrics")
}

/// The whole response (status line, headers, body) to `GET path` on the relay's HTTP
/// side on `port`.
pub fn http_get(port: u16, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("connecting to the relay's HTTP port {port}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .map_err(|e| format!("asking for {path}: {e}"))?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|e| format!("reading {path}: {e}"))?;
    Ok(text)
}

/// Sums each driver counter over the workers in a `/metrics` page.
pub fn parse_metrics(text: &str) -> DriverCounters {
    let mut counters = DriverCounters::default();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        let name = name.split('{').next().unwrap_or_default();
        match name {
            "moq_relay_worker_datagrams_total" => counters.datagrams_received += value,
            "moq_relay_worker_receive_calls_total" => counters.receive_calls += value,
            "moq_relay_worker_datagrams_sent_total" => counters.datagrams_sent += value,
            "moq_relay_worker_send_calls_total" => counters.send_calls += value,
            "moq_relay_send_errors_total" => counters.send_errors += value,
            "moq_relay_worker_parks_total" => counters.parks += value,
            _ => {}
        }
    }
    counters
}

/// `perf stat` counting one process's system calls until [`stop`](Self::stop).
#[derive(Debug)]
pub struct SyscallCount {
    child: Child,
}

impl SyscallCount {
    /// Starts counting `pid`'s system calls; `None` if perf cannot (not installed, or
    /// tracepoints not allowed).
    pub fn start(pid: u32) -> Option<Self> {
        let child = Command::new("perf")
            .args(["stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-p"])
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        // perf attaches within milliseconds; the window starts after this.
        std::thread::sleep(Duration::from_millis(100));
        Some(Self { child })
    }

    /// Stops counting; the system calls counted, if perf reported them.
    pub fn stop(self) -> Option<u64> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let output = self.child.wait_with_output().ok()?;
        parse_perf(&String::from_utf8_lossy(&output.stderr))
    }
}

/// The count in `perf stat -x ,` output: `count,unit,event,...`.
fn parse_perf(text: &str) -> Option<u64> {
    text.lines()
        .find(|line| line.contains("raw_syscalls:sys_enter"))
        .and_then(|line| line.split(',').next())
        .and_then(|count| count.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_counters_are_summed() {
        let page = "# HELP x\n\
            moq_relay_worker_datagrams_total{worker=\"0\"} 10\n\
            moq_relay_worker_datagrams_total{worker=\"1\"} 5\n\
            moq_relay_worker_receive_calls_total{worker=\"0\"} 3\n\
            moq_relay_worker_datagrams_sent_total{worker=\"0\"} 40\n\
            moq_relay_worker_send_calls_total{worker=\"0\"} 4\n\
            moq_relay_send_errors_total 2\n\
            moq_relay_worker_parks_total{worker=\"0\"} 6\n\
            moq_relay_worker_parks_total{worker=\"1\"} 1\n\
            moq_relay_sessions 2\n";
        assert_eq!(
            parse_metrics(page),
            DriverCounters {
                datagrams_received: 15,
                receive_calls: 3,
                datagrams_sent: 40,
                send_calls: 4,
                send_errors: 2,
                parks: 7,
            }
        );
    }

    #[test]
    fn perf_output_gives_the_count() {
        assert_eq!(
            parse_perf("12345,,raw_syscalls:sys_enter,1000000,100.00,,\n"),
            Some(12345)
        );
        assert_eq!(
            parse_perf("<not supported>,,raw_syscalls:sys_enter\n"),
            None
        );
    }

    #[test]
    fn per_delivery_figures_divide_the_window() {
        let before = DriverCounters::default();
        let after = DriverCounters {
            datagrams_received: 100,
            receive_calls: 50,
            datagrams_sent: 300,
            send_calls: 100,
            send_errors: 1,
            parks: 40,
        };
        let io = RelayIo::of(before, after, Some(400), 200);
        assert_eq!(io.datagrams_per_park, Some(2.5));
        let uncounted = DriverCounters { parks: 0, ..after };
        assert_eq!(
            RelayIo::of(before, uncounted, None, 200).datagrams_per_park,
            None,
            "a driver that does not count its parks reports none"
        );
        assert_eq!(io.send_errors, 1);
        assert_eq!(io.syscalls_per_delivery, Some(2.0));
        assert_eq!(io.datagrams_per_send, 3.0);
        assert_eq!(io.datagrams_per_receive, 2.0);
        assert_eq!(io.send_calls_per_delivery, 0.5);
    }
}
