//! What a link does to the packets crossing it, in one direction, and its text form.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What the link does to each packet crossing it in one direction. The default is a
/// perfect link: nothing lost, nothing late.
///
/// The text form (for flags and configuration) is a comma-separated list of `key=value`,
/// any subset of: `loss=1%`, `burst=3`, `reorder=2%`, `reorder_delay=10ms`,
/// `duplicate=1%`, `corrupt=1%`, `delay=50ms`, `jitter=5ms`, `rate=10mbit`,
/// `queue=100ms`, `mtu=1280`, `blackhole=true`. An empty string (or `perfect`) is the
/// perfect link.
/// Fractions take `%` or a plain fraction (`0.01`); durations `us`, `ms` or `s`; rates
/// `bit`, `kbit`, `mbit` or `gbit` per second.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairment {
    /// The fraction of packets lost, on average (0 to 1).
    pub loss: f64,
    /// The mean length of a run of lost packets: 1 loses packets independently; more
    /// makes losses come in bursts (a Gilbert-Elliott model with the same average loss),
    /// each over once its flow is silent for [`BURST_SPAN`](crate::BURST_SPAN).
    pub burst: f64,
    /// The fraction of packets held back by [`Impairment::reorder_delay`], so that the
    /// packets behind them overtake them.
    pub reorder: f64,
    /// How long a reordered packet is held back beyond the others.
    pub reorder_delay: Duration,
    /// The fraction of packets delivered twice.
    pub duplicate: f64,
    /// The fraction of packets delivered with one bit flipped.
    pub corrupt: f64,
    /// The one-way delay every packet gets (half the round trip it adds when both
    /// directions have it).
    pub delay: Duration,
    /// Each packet's delay varies uniformly within `delay ± jitter`. Jitter alone never
    /// reorders: a packet never leaves before the one that arrived before it.
    pub jitter: Duration,
    /// A bottleneck: packets leave at most at this many bits per second (`None`:
    /// unlimited).
    pub rate: Option<u64>,
    /// The bottleneck's buffer, as the time it takes to drain at [`Impairment::rate`]: a
    /// packet that would wait longer is dropped (tail drop).
    pub queue: Duration,
    /// The path MTU, in bytes of IP packet: a larger packet is dropped without a word,
    /// as a router drops a packet with Don't Fragment set and no ICMP gets back (a PMTU
    /// black hole). `None`: no limit.
    pub mtu: Option<usize>,
    /// Drops everything (a path that went dark).
    pub blackhole: bool,
}

impl Default for Impairment {
    fn default() -> Self {
        Self {
            loss: 0.0,
            burst: 1.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(10),
            duplicate: 0.0,
            corrupt: 0.0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            rate: None,
            queue: Duration::from_millis(100),
            mtu: None,
            blackhole: false,
        }
    }
}

impl Impairment {
    /// A perfect link (the default).
    pub fn perfect() -> Self {
        Self::default()
    }

    /// Checks that every fraction is between 0 and 1 and every number makes sense; the
    /// error names the field.
    pub fn validate(&self) -> Result<(), ImpairmentError> {
        for (key, value) in [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(ImpairmentError::new(
                    key,
                    "must be between 0 and 1 (0% and 100%)",
                ));
            }
        }
        if self.loss >= 1.0 && self.burst > 1.0 {
            return Err(ImpairmentError::new(
                "loss",
                "must be below 100% with burst (use blackhole=true to drop everything)",
            ));
        }
        if self.burst.is_nan() || self.burst < 1.0 {
            return Err(ImpairmentError::new(
                "burst",
                "must be at least 1 (packets)",
            ));
        }
        if self.rate == Some(0) {
            return Err(ImpairmentError::new("rate", "must be above 0"));
        }
        if self.mtu.is_some_and(|mtu| mtu < 68) {
            return Err(ImpairmentError::new("mtu", "must be at least 68 (bytes)"));
        }
        Ok(())
    }
}

impl FromStr for Impairment {
    type Err = ImpairmentError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut impairment = Self::default();
        if text.trim() == "perfect" {
            // What `Display` writes for it.
            return Ok(impairment);
        }
        for item in text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ImpairmentError::new(item, "expected key=value"))?;
            let (key, value) = (key.trim(), value.trim());
            let field = |what: &str| ImpairmentError::new(key, what);
            match key {
                "loss" => impairment.loss = fraction(value).ok_or_else(|| field(FRACTION))?,
                "burst" => {
                    impairment.burst = value
                        .parse()
                        .map_err(|_| field("expected a number of packets, like 3"))?
                }
                "reorder" => impairment.reorder = fraction(value).ok_or_else(|| field(FRACTION))?,
                "reorder_delay" => {
                    impairment.reorder_delay = duration(value).ok_or_else(|| field(DURATION))?
                }
                "duplicate" => {
                    impairment.duplicate = fraction(value).ok_or_else(|| field(FRACTION))?
                }
                "corrupt" => impairment.corrupt = fraction(value).ok_or_else(|| field(FRACTION))?,
                "delay" => impairment.delay = duration(value).ok_or_else(|| field(DURATION))?,
                "jitter" => impairment.jitter = duration(value).ok_or_else(|| field(DURATION))?,
                "rate" => impairment.rate = Some(rate(value).ok_or_else(|| field(RATE))?),
                "queue" => impairment.queue = duration(value).ok_or_else(|| field(DURATION))?,
                "mtu" => {
                    impairment.mtu = Some(
                        value
                            .parse()
                            .map_err(|_| field("expected bytes, like 1280"))?,
                    )
                }
                "blackhole" => {
                    impairment.blackhole =
                        value.parse().map_err(|_| field("expected true or false"))?
                }
                _ => {
                    return Err(ImpairmentError::new(
                        key,
                        "unknown; expected loss, burst, reorder, reorder_delay, duplicate, \
                         corrupt, delay, jitter, rate, queue, mtu or blackhole",
                    ));
                }
            }
        }
        impairment.validate()?;
        Ok(impairment)
    }
}

impl fmt::Display for Impairment {
    /// The text form, with only what differs from a perfect link (`perfect` when nothing
    /// does); it parses back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = Self::default();
        let mut items = Vec::new();
        let percent = |value: f64| format!("{}%", value * 100.0);
        if self.loss != base.loss {
            items.push(format!("loss={}", percent(self.loss)));
        }
        if self.burst != base.burst {
            items.push(format!("burst={}", self.burst));
        }
        if self.reorder != base.reorder {
            items.push(format!("reorder={}", percent(self.reorder)));
        }
        if self.reorder_delay != base.reorder_delay {
            items.push(format!(
                "reorder_delay={}us",
                self.reorder_delay.as_micros()
            ));
        }
        if self.duplicate != base.duplicate {
            items.push(format!("duplicate={}", percent(self.duplicate)));
        }
        if self.corrupt != base.corrupt {
            items.push(format!("corrupt={}", percent(self.corrupt)));
        }
        if self.delay != base.delay {
            items.push(format!("delay={}us", self.delay.as_micros()));
        }
        if self.jitter != base.jitter {
            items.push(format!("jitter={}us", self.jitter.as_micros()));
        }
        if let Some(rate) = self.rate {
            items.push(format!("rate={rate}bit"));
        }
        if self.queue != base.queue {
            items.push(format!("queue={}us", self.queue.as_micros()));
        }
        if let Some(mtu) = self.mtu {
            items.push(format!("mtu={mtu}"));
        }
        if self.blackhole {
            items.push("blackhole=true".into());
        }
        if items.is_empty() {
            return f.write_str("perfect");
        }
        f.write_str(&items.join(","))
    }
}

/// A malformed impairment: which key, and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImpairmentError {
    /// The key (or the item, where it had no `=`).
    pub key: String,
    /// What was expected.
    pub reason: String,
}

impl ImpairmentError {
    fn new(key: &str, reason: &str) -> Self {
        Self {
            key: key.to_string(),
            reason: reason.to_string(),
        }
    }
}

impl fmt::Display for ImpairmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "impairment `{}`: {}", self.key, self.reason)
    }
}

impl std::error::Error for ImpairmentError {}

const FRACTION: &str = "expected a fraction, like 1% or 0.01";
const DURATION: &str = "expected a duration, like 50ms, 200us or 1s";
const RATE: &str = "expected a rate, like 10mbit, 500kbit or 1gbit";

/// `1%` or `0.01`.
fn fraction(text: &str) -> Option<f64> {
    let value: f64 = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().ok()? / 100.0,
        None => text.parse().ok()?,
    };
    value.is_finite().then_some(value)
}

/// `50ms`, `200us`, `1s` or `1.5s`.
fn duration(text: &str) -> Option<Duration> {
    let (number, unit) = split_unit(text);
    let value: f64 = number.parse().ok()?;
    let seconds = match unit {
        "us" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

/// `10mbit`, `500kbit`, `1gbit` or `8000bit`, in bits per second.
fn rate(text: &str) -> Option<u64> {
    let (number, unit) = split_unit(text);
    let value: f64 = number.parse().ok()?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => return None,
    };
    let bits = value * scale;
    (bits.is_finite() && bits >= 1.0).then_some(bits as u64)
}

/// Splits `50ms` into `("50", "ms")`.
fn split_unit(text: &str) -> (&str, &str) {
    let at = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    (text[..at].trim(), text[at..].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_parses_every_key() {
        let impairment: Impairment = "loss=1%, burst=3, reorder=2%, reorder_delay=5ms, \
             duplicate=0.5%, corrupt=0.01, delay=50ms, jitter=200us, rate=10mbit, \
             queue=1s, mtu=1280, blackhole=false"
            .parse()
            .unwrap();
        assert_eq!(
            impairment,
            Impairment {
                loss: 0.01,
                burst: 3.0,
                reorder: 0.02,
                reorder_delay: Duration::from_millis(5),
                duplicate: 0.005,
                corrupt: 0.01,
                delay: Duration::from_millis(50),
                jitter: Duration::from_micros(200),
                rate: Some(10_000_000),
                queue: Duration::from_secs(1),
                mtu: Some(1280),
                blackhole: false,
            }
        );
        assert_eq!("".parse::<Impairment>().unwrap(), Impairment::perfect());
    }

    #[test]
    fn the_text_form_round_trips() {
        for text in [
            "loss=5%,burst=2,delay=50ms,jitter=5ms,rate=10mbit,mtu=1300",
            "",
            "perfect",
            "loss=0%",
        ] {
            let impairment: Impairment = text.parse().unwrap();
            let again: Impairment = impairment.to_string().parse().unwrap();
            assert_eq!(again, impairment, "{text}");
        }
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let error = "loss=1%,delay=fast".parse::<Impairment>().unwrap_err();
        assert_eq!(error.key, "delay");
        assert_eq!("loss=150%".parse::<Impairment>().unwrap_err().key, "loss");
        assert_eq!("rate=10mbps".parse::<Impairment>().unwrap_err().key, "rate");
        assert_eq!("burst=0.5".parse::<Impairment>().unwrap_err().key, "burst");
        assert_eq!("speed=1".parse::<Impairment>().unwrap_err().key, "speed");
        assert_eq!("loss".parse::<Impairment>().unwrap_err().key, "loss");
        assert_eq!("mtu=20".parse::<Impairment>().unwrap_err().key, "mtu");
    }
}
