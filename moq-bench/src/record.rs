//! What a run reports: one JSON object per line (schema `moq-bench/1`), and the same as a
//! row of the human table.
//!
//! A run record (`"kind": "run"`) is one round of one profile against one relay; a
//! comparison record (`"kind": "comparison"`) is the paired verdict of two relays over
//! alternating rounds. Fields are added, never renamed or repurposed, within a schema
//! version, so old JSON stays comparable with new.

use serde::{Deserialize, Serialize};

use crate::stats::{Latency, Paired};

/// The schema every record carries.
pub const SCHEMA: &str = "moq-bench/1";

/// One round of one profile against one relay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Always `"run"`.
    pub kind: String,
    /// `chat`, `media` or `fanout-chat` / `fanout-media`.
    pub profile: String,
    /// Which relay: `relay` for a single one, `a` or `b` in a comparison.
    pub label: String,
    /// The round, from 1.
    pub round: u32,
    /// Client connections (publishers and subscribers).
    pub connections: u64,
    /// Publishing connections.
    pub publishers: u64,
    /// Frames offered per second, all publishers together (0 when unpaced).
    pub offered_rate: f64,
    /// Bytes per frame payload.
    pub frame_bytes: u64,
    /// Frames per group.
    pub frames_per_group: u64,
    /// Length of the measured phase, in seconds.
    pub seconds: f64,
    /// Frames sent in the measured phase.
    pub offered: u64,
    /// Deliveries expected (each frame times its subscribers).
    pub expected: u64,
    /// Deliveries that arrived.
    pub delivered: u64,
    /// `1 - delivered / expected` (0 when nothing was expected).
    pub loss: f64,
    /// Send-to-receive latency of every delivery, in microseconds.
    pub latency_us: Latency,
    /// What the relay process spent.
    pub relay: ProcessCost,
    /// What the load generator spent (to show it was not the bottleneck).
    pub client: ProcessCost,
    /// The relay's resident memory through the measured phase, about once a second: a
    /// leak shows as a line that keeps rising.
    #[serde(default)]
    pub relay_rss: Vec<RssSample>,
    /// The relay's I/O over the measured phase, where it serves `/metrics`.
    #[serde(default)]
    pub relay_io: Option<crate::io::RelayIo>,
    /// The impaired path the clients reached the relay through (`--impair`), if any.
    #[serde(default)]
    pub path: Option<PathRecord>,
}

/// The impairment proxy a round's clients reached the relay through, and what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathRecord {
    /// The impairment, both ways, in `moq-impair`'s text form.
    pub impairment: String,
    /// The proxy's seed.
    pub seed: u64,
    /// Packets to the relay lost (at random, or to a full bottleneck queue).
    pub lost_to_relay: u64,
    /// Packets to the clients lost.
    pub lost_to_clients: u64,
    /// Packets that reached the proxy, both ways.
    pub packets: u64,
    /// Packets to the clients dropped by a full bottleneck queue (part of
    /// `lost_to_clients`): what bursts cost at a shallow queue.
    #[serde(default)]
    pub overflowed_to_clients: u64,
    /// The mean number of packets the relay sent one client back to back (see
    /// `moq_impair::BACK_TO_BACK`).
    #[serde(default)]
    pub mean_burst_to_clients: f64,
    /// The most packets the relay sent one client back to back.
    #[serde(default)]
    pub largest_burst_to_clients: u64,
}

/// A process's resident memory at one moment of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RssSample {
    /// Seconds since the measured phase started.
    pub seconds: f64,
    /// Resident memory, bytes.
    pub bytes: u64,
}

/// A process's cost over the measured phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCost {
    /// User plus system CPU seconds.
    pub cpu_seconds: f64,
    /// CPU microseconds per delivered frame (0 when nothing was delivered: an idle round).
    pub cpu_us_per_delivery: f64,
    /// CPU use as a share of one core (1.0 is one core busy).
    pub cores: f64,
    /// Voluntary context switches (waits), all threads.
    pub voluntary_switches: u64,
    /// Involuntary context switches (preemptions), all threads.
    pub involuntary_switches: u64,
    /// Resident memory at the end of the measured phase, in bytes (0 if unknown).
    pub rss_bytes: u64,
    /// Resident memory at the start of the measured phase, in bytes (0 if unknown).
    #[serde(default)]
    pub rss_bytes_at_start: u64,
    /// Resident memory added per client connection, in bytes (0 if unknown).
    pub rss_bytes_per_connection: u64,
}

/// The paired verdict of relay B against relay A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRecord {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Always `"comparison"`.
    pub kind: String,
    /// The profile both ran.
    pub profile: String,
    /// Relay A's command.
    pub a: String,
    /// Relay B's command.
    pub b: String,
    /// What was compared: `relay_cpu_us_per_delivery`, `latency_p50_us` or
    /// `relay_rss_bytes_per_connection`.
    pub metric: String,
    /// B / A per pair, median, spread and flags.
    pub paired: Paired,
}

impl RunRecord {
    /// The JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The header of the human table.
    pub fn table_header() -> String {
        format!(
            "{:<13} {:<6} {:>5} {:>6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>10} {:>7} {:>9} {:>16} {:>11}",
            "profile",
            "label",
            "round",
            "conns",
            "offered",
            "delivered",
            "loss %",
            "p50 ms",
            "p99 ms",
            "max ms",
            "relay us/m",
            "cores",
            "KB/conn",
            "RSS MB start-end",
            "client us/m"
        )
    }

    /// This record as a row of the human table.
    pub fn table_row(&self) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        format!(
            "{:<13} {:<6} {:>5} {:>6} {:>9} {:>9} {:>7.3} {:>9.2} {:>9.2} {:>9.2} {:>10.1} {:>7.2} {:>9.1} {:>16} {:>11.1}",
            self.profile,
            self.label,
            self.round,
            self.connections,
            self.offered,
            self.delivered,
            self.loss * 100.0,
            ms(self.latency_us.p50),
            ms(self.latency_us.p99),
            ms(self.latency_us.max),
            self.relay.cpu_us_per_delivery,
            self.relay.cores,
            self.relay.rss_bytes_per_connection as f64 / 1024.0,
            format!(
                "{:.1}-{:.1}",
                self.relay.rss_bytes_at_start as f64 / MIB,
                self.relay.rss_bytes as f64 / MIB
            ),
            self.client.cpu_us_per_delivery,
        )
    }
}

const MIB: f64 = (1u64 << 20) as f64;

impl ComparisonRecord {
    /// The JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunRecord {
        RunRecord {
            schema: SCHEMA.into(),
            kind: "run".into(),
            profile: "chat".into(),
            label: "a".into(),
            round: 1,
            connections: 1000,
            publishers: 1000,
            offered_rate: 1000.0,
            frame_bytes: 100,
            frames_per_group: 1,
            seconds: 10.0,
            offered: 10_000,
            expected: 90_000,
            delivered: 89_990,
            loss: 10.0 / 90_000.0,
            latency_us: Latency {
                samples: 89_990,
                p50: 800,
                p99: 4000,
                max: 9000,
            },
            relay: ProcessCost {
                cpu_seconds: 9.0,
                cpu_us_per_delivery: 100.0,
                cores: 0.9,
                voluntary_switches: 5,
                involuntary_switches: 6,
                rss_bytes: 50 << 20,
                rss_bytes_at_start: 48 << 20,
                rss_bytes_per_connection: 40_000,
            },
            client: ProcessCost::default(),
            relay_rss: vec![RssSample {
                seconds: 1.0,
                bytes: 49 << 20,
            }],
            relay_io: None,
            path: None,
        }
    }

    /// The schema is a contract with whoever keeps the JSON: these names and types.
    #[test]
    fn a_run_record_has_the_documented_fields_and_round_trips() {
        let record = sample();
        let value: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
        assert_eq!(value["schema"], "moq-bench/1");
        assert_eq!(value["kind"], "run");
        for key in [
            "profile",
            "label",
            "round",
            "connections",
            "publishers",
            "offered_rate",
            "frame_bytes",
            "frames_per_group",
            "seconds",
            "offered",
            "expected",
            "delivered",
            "loss",
            "latency_us",
            "relay",
            "client",
        ] {
            assert!(value.get(key).is_some(), "missing {key}");
        }
        for key in ["samples", "p50", "p99", "max"] {
            assert!(value["latency_us"][key].is_u64(), "latency_us.{key}");
        }
        for key in [
            "cpu_seconds",
            "cpu_us_per_delivery",
            "cores",
            "voluntary_switches",
            "involuntary_switches",
            "rss_bytes",
            "rss_bytes_at_start",
            "rss_bytes_per_connection",
        ] {
            assert!(value["relay"][key].is_number(), "relay.{key}");
        }
        assert_eq!(value["relay_rss"][0]["bytes"], 49u64 << 20);
        let back: RunRecord = serde_json::from_value(value).unwrap();
        assert_eq!(back, record);
        assert!(!record.to_json().contains('\n'), "one record, one line");
        // A record written before the RSS fields existed still reads.
        let mut old: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
        old.as_object_mut().unwrap().remove("relay_rss");
        old["relay"]
            .as_object_mut()
            .unwrap()
            .remove("rss_bytes_at_start");
        let old: RunRecord = serde_json::from_value(old).unwrap();
        assert!(old.relay_rss.is_empty());
    }

    #[test]
    fn a_comparison_record_carries_the_paired_verdict() {
        let record = ComparisonRecord {
            schema: SCHEMA.into(),
            kind: "comparison".into(),
            profile: "chat".into(),
            a: "relay-a".into(),
            b: "relay-b".into(),
            metric: "relay_cpu_us_per_delivery".into(),
            paired: Paired::of(&[1.0, 2.0], &[1.5, 2.0]),
        };
        let value: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
        assert_eq!(value["kind"], "comparison");
        assert_eq!(value["paired"]["ratios"][0], 1.5);
        assert!(value["paired"]["flags"].is_array());
        let back: ComparisonRecord = serde_json::from_value(value).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn a_table_row_lines_up_with_the_header() {
        let (header, row) = (RunRecord::table_header(), sample().table_row());
        assert_eq!(row.len(), header.len(), "\n{header}\n{row}");
        assert!(row.starts_with("chat"));
    }
}
