//! Transport parameters, exchanged in each side's first frame (spec: draft-ietf-quic-qmux-02
//! §5), encoded as QUIC's (RFC 9000 §18): a sequence of ID, length, value.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use moqx_net::coding::varint::{read_varint, varint_len, write_varint};

/// `max_record_size`: the largest Frames field the sender of the parameter takes in one
/// record (spec: -01 and -02 §5.2).
const MAX_RECORD_SIZE: u64 = 0x0571_c594_29cd_0845;
/// `application_protocols`: the application protocols a side speaks, for carriers that
/// negotiate none themselves (plain TCP). Not in the draft: deployed QMux peers (the
/// `qmux` crate and its TypeScript twin) send it, and both sides take the server's first
/// choice that the client also lists.
const APPLICATION_PROTOCOLS: u64 = 0x3d4f_9c2a_8b1e_6075;

/// The default and the least `max_record_size` (spec: -01 and -02 §5.2): a 16 KB record
/// with a 2-byte Size, one TLS record's worth.
pub const DEFAULT_MAX_RECORD_SIZE: u64 = 16_382;

/// The most streams of one direction a side may allow (RFC 9000 §4.6).
const MAX_STREAMS_LIMIT: u64 = 1 << 60;

/// One side's transport parameters. Absent ones read as QUIC's defaults: no credit and no
/// streams until given, no idle timeout, a `max_record_size` of 16,382.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportParameters {
    /// How long the side stays silent before it gives the connection up (0: never).
    pub max_idle_timeout_ms: u64,
    /// Bytes the peer may send on all streams together.
    pub initial_max_data: u64,
    /// Bytes the peer may send on a bidirectional stream this side opened.
    pub initial_max_stream_data_bidi_local: u64,
    /// Bytes the peer may send on a bidirectional stream the peer opened.
    pub initial_max_stream_data_bidi_remote: u64,
    /// Bytes the peer may send on a unidirectional stream it opened.
    pub initial_max_stream_data_uni: u64,
    /// Bidirectional streams the peer may open.
    pub initial_max_streams_bidi: u64,
    /// Unidirectional streams the peer may open.
    pub initial_max_streams_uni: u64,
    /// The largest record the side takes.
    pub max_record_size: u64,
    /// The application protocols the side offers (a client, in its order) or speaks (a
    /// server), when the carrier negotiated none; empty when it did.
    pub application_protocols: Vec<String>,
}

/// Why a peer's transport parameters were refused: TRANSPORT_PARAMETER_ERROR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParameterError {
    /// The parameters end inside one.
    #[error("the transport parameters are cut short")]
    Short,
    /// A parameter appeared twice.
    #[error("transport parameter {0:#x} appears twice")]
    Duplicate(u64),
    /// A QUIC parameter QMux forbids (connection IDs, tokens, addresses, ACK tuning).
    #[error("transport parameter {0:#x} is prohibited in QMux")]
    Prohibited(u64),
    /// A value the parameter cannot take.
    #[error("transport parameter {name} has an invalid value")]
    Invalid {
        /// The parameter.
        name: &'static str,
    },
}

impl Default for TransportParameters {
    fn default() -> Self {
        Self {
            max_idle_timeout_ms: 0,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            max_record_size: DEFAULT_MAX_RECORD_SIZE,
            application_protocols: Vec::new(),
        }
    }
}

impl TransportParameters {
    /// Encodes the parameters. Those at QUIC's default are left out; `max_record_size`
    /// too unless `records` (draft-00 has no records and no such parameter).
    pub fn encode(&self, records: bool) -> Bytes {
        let mut buf = BytesMut::new();
        let integers = [
            (0x01, self.max_idle_timeout_ms),
            (0x04, self.initial_max_data),
            (0x05, self.initial_max_stream_data_bidi_local),
            (0x06, self.initial_max_stream_data_bidi_remote),
            (0x07, self.initial_max_stream_data_uni),
            (0x08, self.initial_max_streams_bidi),
            (0x09, self.initial_max_streams_uni),
        ];
        for (id, value) in integers {
            if value > 0 {
                put_integer(&mut buf, id, value);
            }
        }
        if records && self.max_record_size != DEFAULT_MAX_RECORD_SIZE {
            put_integer(&mut buf, MAX_RECORD_SIZE, self.max_record_size);
        }
        if !self.application_protocols.is_empty() {
            let mut value = BytesMut::new();
            for protocol in &self.application_protocols {
                put_varint(&mut value, protocol.len() as u64);
                value.put_slice(protocol.as_bytes());
            }
            put_varint(&mut buf, APPLICATION_PROTOCOLS);
            put_varint(&mut buf, value.len() as u64);
            buf.put_slice(&value);
        }
        buf.freeze()
    }

    /// Decodes a peer's parameters, refusing what QMux forbids; unknown parameters (QUIC's
    /// reserved ones among them) are skipped.
    pub fn decode(mut buf: Bytes) -> Result<Self, ParameterError> {
        let mut parameters = Self::default();
        let mut seen: Vec<u64> = Vec::new();
        while buf.has_remaining() {
            let id = read_varint(&mut buf).map_err(|_| ParameterError::Short)?;
            let len = read_varint(&mut buf).map_err(|_| ParameterError::Short)?;
            let len = usize::try_from(len).map_err(|_| ParameterError::Short)?;
            if buf.remaining() < len {
                return Err(ParameterError::Short);
            }
            let value = buf.split_to(len);
            let known = matches!(id, 0x01 | 0x04..=0x09 | 0x20 | 0x1d)
                || id == MAX_RECORD_SIZE
                || id == APPLICATION_PROTOCOLS;
            if known {
                if seen.contains(&id) {
                    return Err(ParameterError::Duplicate(id));
                }
                seen.push(id);
            }
            match id {
                0x01 => parameters.max_idle_timeout_ms = integer(value, "max_idle_timeout")?,
                0x04 => parameters.initial_max_data = integer(value, "initial_max_data")?,
                0x05 => {
                    parameters.initial_max_stream_data_bidi_local =
                        integer(value, "initial_max_stream_data_bidi_local")?
                }
                0x06 => {
                    parameters.initial_max_stream_data_bidi_remote =
                        integer(value, "initial_max_stream_data_bidi_remote")?
                }
                0x07 => {
                    parameters.initial_max_stream_data_uni =
                        integer(value, "initial_max_stream_data_uni")?
                }
                0x08 => {
                    parameters.initial_max_streams_bidi = streams(
                        integer(value, "initial_max_streams_bidi")?,
                        "initial_max_streams_bidi",
                    )?
                }
                0x09 => {
                    parameters.initial_max_streams_uni = streams(
                        integer(value, "initial_max_streams_uni")?,
                        "initial_max_streams_uni",
                    )?
                }
                // max_datagram_frame_size and reset_stream_at: extensions this side never
                // uses (it sends no DATAGRAM and no RESET_STREAM_AT), so what the peer
                // takes of them does not matter; their values are still checked.
                0x20 => {
                    integer(value, "max_datagram_frame_size")?;
                }
                0x1d if !value.is_empty() => {
                    return Err(ParameterError::Invalid {
                        name: "reset_stream_at",
                    });
                }
                0x1d => {}
                MAX_RECORD_SIZE => {
                    let size = integer(value, "max_record_size")?;
                    // spec: -02 §5.2, a value below the default is an error.
                    if size < DEFAULT_MAX_RECORD_SIZE {
                        return Err(ParameterError::Invalid {
                            name: "max_record_size",
                        });
                    }
                    parameters.max_record_size = size;
                }
                APPLICATION_PROTOCOLS => parameters.application_protocols = protocols(value)?,
                // original_destination_connection_id, stateless_reset_token,
                // max_udp_payload_size, ack_delay_exponent, max_ack_delay,
                // disable_active_migration, preferred_address,
                // active_connection_id_limit, initial_ and retry_source_connection_id.
                0x00 | 0x02 | 0x03 | 0x0a..=0x10 => return Err(ParameterError::Prohibited(id)),
                _ => {}
            }
        }
        Ok(parameters)
    }
}

fn integer(mut value: Bytes, name: &'static str) -> Result<u64, ParameterError> {
    let integer = read_varint(&mut value).map_err(|_| ParameterError::Invalid { name })?;
    if value.has_remaining() {
        return Err(ParameterError::Invalid { name });
    }
    Ok(integer)
}

fn streams(count: u64, name: &'static str) -> Result<u64, ParameterError> {
    match count <= MAX_STREAMS_LIMIT {
        true => Ok(count),
        false => Err(ParameterError::Invalid { name }),
    }
}

/// The most application protocols kept of a peer's list, and the longest name: a list is
/// a few names of a dozen bytes each.
const MOST_PROTOCOLS: usize = 32;
const LONGEST_PROTOCOL: usize = 255;

fn protocols(mut value: Bytes) -> Result<Vec<String>, ParameterError> {
    let name = "application_protocols";
    let mut protocols = Vec::new();
    while value.has_remaining() {
        let len = read_varint(&mut value).map_err(|_| ParameterError::Invalid { name })?;
        let len = usize::try_from(len).map_err(|_| ParameterError::Invalid { name })?;
        if len == 0 || len > LONGEST_PROTOCOL || value.remaining() < len {
            return Err(ParameterError::Invalid { name });
        }
        let protocol = std::str::from_utf8(&value.split_to(len))
            .map_err(|_| ParameterError::Invalid { name })?
            .to_owned();
        if protocols.len() == MOST_PROTOCOLS {
            return Err(ParameterError::Invalid { name });
        }
        protocols.push(protocol);
    }
    if protocols.is_empty() {
        return Err(ParameterError::Invalid { name });
    }
    Ok(protocols)
}

fn put_integer(buf: &mut BytesMut, id: u64, value: u64) {
    put_varint(buf, id);
    put_varint(buf, varint_len(value) as u64);
    put_varint(buf, value);
}

/// Every value written here is an ID or value below 2^62 or a length of bytes in memory.
fn put_varint(buf: &mut BytesMut, value: u64) {
    let _ = write_varint(
        buf,
        value.min(moqx_net::coding::varint::MAX_VARINT),
        "transport parameter",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parameters_round_trip(
            idle in 0u64..1 << 40,
            data in 0u64..1 << 62,
            bidi_local in 0u64..1 << 62,
            bidi_remote in 0u64..1 << 62,
            uni in 0u64..1 << 62,
            streams_bidi in 0u64..=1 << 60,
            streams_uni in 0u64..=1 << 60,
            record in DEFAULT_MAX_RECORD_SIZE..1 << 62,
            protocols in proptest::collection::vec("[a-z0-9.-]{1,20}", 0..4),
        ) {
            let parameters = TransportParameters {
                max_idle_timeout_ms: idle,
                initial_max_data: data,
                initial_max_stream_data_bidi_local: bidi_local,
                initial_max_stream_data_bidi_remote: bidi_remote,
                initial_max_stream_data_uni: uni,
                initial_max_streams_bidi: streams_bidi,
                initial_max_streams_uni: streams_uni,
                max_record_size: record,
                application_protocols: protocols,
            };
            prop_assert_eq!(TransportParameters::decode(parameters.encode(true)), Ok(parameters));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = TransportParameters::decode(Bytes::from(bytes));
        }
    }

    #[test]
    fn absent_parameters_read_as_quic_defaults() {
        assert_eq!(
            TransportParameters::decode(Bytes::new()),
            Ok(TransportParameters::default())
        );
        assert_eq!(
            TransportParameters::default().max_record_size,
            DEFAULT_MAX_RECORD_SIZE
        );
    }

    #[test]
    fn what_qmux_forbids_is_refused() {
        // stateless_reset_token (0x02), 16 bytes.
        let mut bytes = vec![0x02, 16];
        bytes.extend([0u8; 16]);
        assert_eq!(
            TransportParameters::decode(Bytes::from(bytes)),
            Err(ParameterError::Prohibited(0x02))
        );
        // initial_max_data twice.
        assert_eq!(
            TransportParameters::decode(Bytes::from_static(&[0x04, 1, 5, 0x04, 1, 6])),
            Err(ParameterError::Duplicate(0x04))
        );
        // A max_record_size below the default.
        let mut buf = BytesMut::new();
        put_integer(&mut buf, MAX_RECORD_SIZE, 1_000);
        assert_eq!(
            TransportParameters::decode(buf.freeze()),
            Err(ParameterError::Invalid {
                name: "max_record_size"
            })
        );
        // More streams than QUIC allows.
        let mut buf = BytesMut::new();
        put_integer(&mut buf, 0x08, (1 << 60) + 1);
        assert!(TransportParameters::decode(buf.freeze()).is_err());
    }

    #[test]
    fn unknown_and_reserved_parameters_are_skipped() {
        // A reserved parameter (31 * 5 + 27 = 182) with 3 bytes, then initial_max_data 5.
        let mut buf = BytesMut::new();
        put_varint(&mut buf, 182);
        buf.put_slice(&[3, 1, 2, 3]);
        buf.put_slice(&[0x04, 1, 5]);
        let parameters = TransportParameters::decode(buf.freeze()).unwrap();
        assert_eq!(parameters.initial_max_data, 5);
    }

    #[test]
    fn draft_00_parameters_carry_no_record_size() {
        let parameters = TransportParameters {
            max_record_size: 65_536,
            ..TransportParameters::default()
        };
        assert!(parameters.encode(false).is_empty());
        assert!(!parameters.encode(true).is_empty());
    }
}
