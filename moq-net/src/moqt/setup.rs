//! The first message of each side: CLIENT_SETUP and SERVER_SETUP (drafts 14, 16), or the one
//! SETUP both sides send on their control streams (18), with the setup options every draft
//! defines (§ "SETUP" / "CLIENT_SETUP and SERVER_SETUP", "Setup Parameters" / "Setup
//! Options"). Setup option types are the same in every draft, apart from
//! MOQT_IMPLEMENTATION (see [`Draft::implementation_parameter`]).

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::control::Control;
use super::int::{read_int, write_int};
use super::params::{Parameter, Parameters, Value};
use crate::coding::{DecodeError, EncodeError};

/// The most versions a CLIENT_SETUP may offer here (draft 14).
pub const MAX_SETUP_VERSIONS: usize = 64;

/// PATH: the path (and query) of a `moqt://` URL, raw QUIC only, from the client.
const PATH: u64 = 0x01;
/// MAX_REQUEST_ID: the first request id the peer may not use yet (14, 16).
const MAX_REQUEST_ID: u64 = 0x02;
/// AUTHORIZATION TOKEN: a token the peer may authorize the session with (repeatable).
const AUTHORIZATION_TOKEN: u64 = 0x03;
/// MAX_AUTH_TOKEN_CACHE_SIZE: bytes of registered token aliases the sender keeps.
const MAX_AUTH_TOKEN_CACHE_SIZE: u64 = 0x04;
/// AUTHORITY: the authority of a `moqt://` URL, raw QUIC only, from the client.
const AUTHORITY: u64 = 0x05;

/// What a SETUP carries: the options this codec knows, typed, and the rest as they came.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetupOptions {
    /// PATH: the path and query of a `moqt://` URL (raw QUIC, client only).
    pub path: Option<String>,
    /// AUTHORITY: the authority of a `moqt://` URL (raw QUIC, client only).
    pub authority: Option<String>,
    /// MAX_REQUEST_ID: the peer may use request ids below this (14, 16; absent means 0,
    /// no requests).
    pub max_request_id: Option<u64>,
    /// MAX_AUTH_TOKEN_CACHE_SIZE: bytes of token aliases the sender keeps (absent: 0).
    pub max_auth_token_cache_size: Option<u64>,
    /// AUTHORIZATION TOKEN options, each as it came (alias type, alias, token type and
    /// value: read by whoever authorizes).
    pub authorization_tokens: Vec<Bytes>,
    /// MOQT_IMPLEMENTATION: the sender's implementation name and version (16 on).
    pub implementation: Option<String>,
    /// Options this codec does not know (grease, extensions), in order.
    pub unknown: Parameters,
}

impl SetupOptions {
    fn to_parameters(&self, draft: Draft) -> Result<Parameters, EncodeError> {
        let mut list = Vec::new();
        let text = |kind, text: &String| Parameter::bytes(kind, Bytes::from(text.clone()));
        if let Some(path) = &self.path {
            list.push(text(PATH, path));
        }
        if let Some(max) = self.max_request_id {
            if !draft.has_request_id_flow_control() {
                return Err(EncodeError::NotInVersion("MAX_REQUEST_ID"));
            }
            list.push(Parameter::int(MAX_REQUEST_ID, max));
        }
        for token in &self.authorization_tokens {
            list.push(Parameter::bytes(AUTHORIZATION_TOKEN, token.clone()));
        }
        if let Some(size) = self.max_auth_token_cache_size {
            list.push(Parameter::int(MAX_AUTH_TOKEN_CACHE_SIZE, size));
        }
        if let Some(authority) = &self.authority {
            list.push(text(AUTHORITY, authority));
        }
        // Draft 14 has no type of its own for it (its text reuses AUTHORITY's): left out.
        if let (Some(name), Some(kind)) = (&self.implementation, draft.implementation_parameter()) {
            list.push(text(kind, name));
        }
        list.extend(self.unknown.0.iter().cloned());
        Ok(Parameters(list))
    }

    fn from_parameters(parameters: Parameters, draft: Draft) -> Result<Self, DecodeError> {
        let mut options = SetupOptions::default();
        let implementation = draft.implementation_parameter();
        for parameter in parameters.0 {
            let kind = parameter.kind;
            match (kind, parameter.value) {
                (PATH, Value::Bytes(value)) => set_once(&mut options.path, text(value)?, kind)?,
                (AUTHORITY, Value::Bytes(value)) => {
                    set_once(&mut options.authority, text(value)?, kind)?
                }
                (MAX_REQUEST_ID, Value::Int(value)) if draft.has_request_id_flow_control() => {
                    set_once(&mut options.max_request_id, value, kind)?
                }
                (MAX_AUTH_TOKEN_CACHE_SIZE, Value::Int(value)) => {
                    set_once(&mut options.max_auth_token_cache_size, value, kind)?
                }
                (AUTHORIZATION_TOKEN, Value::Bytes(value)) => {
                    options.authorization_tokens.push(value)
                }
                (kind, Value::Bytes(value)) if Some(kind) == implementation => {
                    set_once(&mut options.implementation, text(value)?, kind)?
                }
                (kind, value) => options.unknown.0.push(Parameter { kind, value }),
            }
        }
        Ok(options)
    }
}

/// A known option that appears twice is a PROTOCOL_VIOLATION ("Senders MUST NOT repeat").
fn set_once<T>(slot: &mut Option<T>, value: T, kind: u64) -> Result<(), DecodeError> {
    if slot.replace(value).is_some() {
        return Err(DecodeError::Duplicate(kind));
    }
    Ok(())
}

fn text(bytes: Bytes) -> Result<String, DecodeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidString)
}

fn encode_options<B: BufMut>(
    options: &SetupOptions,
    buf: &mut B,
    draft: Draft,
) -> Result<(), EncodeError> {
    let parameters = options.to_parameters(draft)?;
    if draft.has_setup_parameter_count() {
        parameters.encode_counted(buf, draft)
    } else {
        parameters.encode(buf, draft)
    }
}

fn decode_options<B: Buf>(buf: &mut B, draft: Draft) -> Result<SetupOptions, DecodeError> {
    let parameters = if draft.has_setup_parameter_count() {
        Parameters::decode_counted(buf, draft)?
    } else {
        Parameters::decode_to_end(buf, draft)?
    };
    SetupOptions::from_parameters(parameters, draft)
}

/// The client's SETUP: CLIENT_SETUP (`0x20`) on 14 and 16, SETUP (`0x2F00`) on 18.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSetup {
    /// The versions offered, most preferred first (14 only: [`Draft::version_number`]).
    pub versions: Vec<u64>,
    /// Its options.
    pub options: SetupOptions,
}

impl Control for ClientSetup {
    const NAME: &'static str = "CLIENT_SETUP";

    fn message_type(draft: Draft) -> Option<u64> {
        Some(if draft.has_unified_setup() {
            0x2f00
        } else {
            0x20
        })
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        if draft.has_setup_versions() {
            if self.versions.is_empty() || self.versions.len() > MAX_SETUP_VERSIONS {
                return Err(EncodeError::BoundsExceeded("supported versions"));
            }
            write_int(buf, self.versions.len() as u64, draft, "version count")?;
            for version in &self.versions {
                write_int(buf, *version, draft, "version")?;
            }
        } else if !self.versions.is_empty() {
            return Err(EncodeError::NotInVersion("setup versions"));
        }
        encode_options(&self.options, buf, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let mut versions = Vec::new();
        if draft.has_setup_versions() {
            let count = read_int(buf, draft)?;
            if count > MAX_SETUP_VERSIONS as u64 {
                return Err(DecodeError::TooMany("supported versions"));
            }
            for _ in 0..count {
                versions.push(read_int(buf, draft)?);
            }
        }
        Ok(Self {
            versions,
            options: decode_options(buf, draft)?,
        })
    }
}

/// The server's SETUP: SERVER_SETUP (`0x21`) on 14 and 16, SETUP (`0x2F00`) on 18.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSetup {
    /// The version selected from the client's offer (14 only).
    pub version: Option<u64>,
    /// Its options.
    pub options: SetupOptions,
}

impl Control for ServerSetup {
    const NAME: &'static str = "SERVER_SETUP";

    fn message_type(draft: Draft) -> Option<u64> {
        Some(if draft.has_unified_setup() {
            0x2f00
        } else {
            0x21
        })
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        match (draft.has_setup_versions(), self.version) {
            (true, Some(version)) => write_int(buf, version, draft, "selected version")?,
            (true, None) => return Err(EncodeError::InvalidValue("selected version")),
            (false, Some(_)) => return Err(EncodeError::NotInVersion("selected version")),
            (false, None) => {}
        }
        encode_options(&self.options, buf, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let version = if draft.has_setup_versions() {
            Some(read_int(buf, draft)?)
        } else {
            None
        };
        Ok(Self {
            version,
            options: decode_options(buf, draft)?,
        })
    }
}
