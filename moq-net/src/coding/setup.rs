//! SETUP: the only message of each side's Setup stream (uni `0x01`), then FIN.
//!
//! spec: moq-lite-05, "Messages", SETUP: `Count (i)` (at most 64) parameters of
//! `Id (i) | ValueLen (i) | Value`. Unknown ids are ignored; a repeated id is rejected.

use std::num::NonZeroU64;

use bytes::{Buf, BufMut};

use super::varint::{read_varint, varint_len, write_varint};
use super::{DecodeError, EncodeError, Message, Version};

/// The most parameters a SETUP may carry.
pub const MAX_SETUP_PARAMETERS: u64 = 64;

const PROBE: u64 = 0x1;
const PATH: u64 = 0x2;
const ROLE: u64 = 0x3;
const COST: u64 = 0x4;
const ORIGIN: u64 = 0x5;

/// The SETUP message. Its `Debug` form redacts the path's credentials (see
/// [`crate::redact`]): SETUP is logged at debug.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Setup {
    /// Whether the sender wants PROBE reports (parameter 0x1; absent means none).
    pub probe: ProbeLevel,
    /// The request path and query, for transports without a URI (parameter 0x2, client
    /// only). The raw value: not normalized, possibly empty, possibly with `?query`.
    pub path: Option<String>,
    /// What the sender will do (parameter 0x3; absent or unknown means both).
    pub role: Option<Role>,
    /// The sender's link cost (parameter 0x4).
    pub cost: Option<u64>,
    /// The sender's origin (hop) id (parameter 0x5; 0 decodes as absent).
    pub origin: Option<NonZeroU64>,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("probe", &self.probe)
            .field("path", &self.path.as_deref().map(crate::redact::redact))
            .field("role", &self.role)
            .field("cost", &self.cost)
            .field("origin", &self.origin)
            .finish()
    }
}

/// The Probe parameter's level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ProbeLevel {
    /// No probing (0, or absent).
    #[default]
    None,
    /// Report measurements (1).
    Report,
    /// Report, and probe for more bandwidth (2; larger values saturate to this).
    Increase,
}

/// The Role parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Only publishes (1).
    Publisher,
    /// Only subscribes (2).
    Subscriber,
}

impl Message for Setup {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_setup_stream() {
            return Err(EncodeError::NotInVersion("SETUP"));
        }
        let probe = match self.probe {
            ProbeLevel::None => None,
            ProbeLevel::Report => Some(1),
            ProbeLevel::Increase => Some(2),
        };
        let role = self.role.map(|role| match role {
            Role::Publisher => 1,
            Role::Subscriber => 2,
        });
        let count = [
            probe.is_some(),
            self.path.is_some(),
            role.is_some(),
            self.cost.is_some(),
            self.origin.is_some(),
        ]
        .into_iter()
        .filter(|present| *present)
        .count();
        write_varint(buf, count as u64, "parameter count")?;
        // Ascending ids: any order is valid, and a stable one makes encodings comparable.
        if let Some(probe) = probe {
            write_varint_parameter(buf, PROBE, probe)?;
        }
        if let Some(path) = &self.path {
            write_varint(buf, PATH, "parameter id")?;
            write_varint(buf, path.len() as u64, "Path")?;
            buf.put_slice(path.as_bytes());
        }
        if let Some(role) = role {
            write_varint_parameter(buf, ROLE, role)?;
        }
        if let Some(cost) = self.cost {
            write_varint_parameter(buf, COST, cost)?;
        }
        if let Some(origin) = self.origin {
            write_varint_parameter(buf, ORIGIN, origin.get())?;
        }
        Ok(())
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_setup_stream() {
            return Err(DecodeError::NotInVersion("SETUP"));
        }
        let count = read_varint(buf)?;
        if count > MAX_SETUP_PARAMETERS {
            return Err(DecodeError::TooMany("SETUP parameters"));
        }
        let mut setup = Setup::default();
        let mut seen = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let id = read_varint(buf)?;
            let len = read_varint(buf)?;
            if (buf.remaining() as u64) < len {
                return Err(DecodeError::Short);
            }
            let value = buf.copy_to_bytes(len as usize);
            if seen.contains(&id) {
                return Err(DecodeError::Duplicate(id));
            }
            seen.push(id);
            match id {
                PROBE => {
                    setup.probe = match varint_value(&value)? {
                        0 => ProbeLevel::None,
                        1 => ProbeLevel::Report,
                        _ => ProbeLevel::Increase,
                    }
                }
                PATH => {
                    let path = std::str::from_utf8(&value)
                        .map_err(|_| DecodeError::InvalidValue("SETUP Path"))?;
                    setup.path = Some(path.to_owned());
                }
                ROLE => {
                    setup.role = match varint_value(&value)? {
                        1 => Some(Role::Publisher),
                        2 => Some(Role::Subscriber),
                        _ => None,
                    }
                }
                COST => setup.cost = Some(varint_value(&value)?),
                ORIGIN => setup.origin = NonZeroU64::new(varint_value(&value)?),
                _ => {} // unknown parameters are ignored
            }
        }
        Ok(setup)
    }
}

fn write_varint_parameter<B: BufMut>(buf: &mut B, id: u64, value: u64) -> Result<(), EncodeError> {
    write_varint(buf, id, "parameter id")?;
    write_varint(buf, varint_len(value) as u64, "parameter length")?;
    write_varint(buf, value, "parameter value")
}

/// A varint-valued parameter is exactly one varint.
fn varint_value(mut value: &[u8]) -> Result<u64, DecodeError> {
    let decoded = read_varint(&mut value)?;
    if !value.is_empty() {
        return Err(DecodeError::Long);
    }
    Ok(decoded)
}
