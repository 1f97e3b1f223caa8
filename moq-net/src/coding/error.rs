//! The codec's errors: what went wrong while decoding or encoding, in enough detail to log,
//! and the one mapping to a wire code ([`crate::Error`]).

/// Why bytes did not decode.
///
/// [`DecodeError::Short`] is not a failure on a live stream: it means "need more bytes", and
/// a stream reader waits for more and reports it only at FIN. Every other variant is
/// malformed input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before the message did.
    #[error("need more bytes")]
    Short,
    /// Bytes were left inside a message's length after its last field.
    #[error("bytes left over inside the message length")]
    Long,
    /// A string was not UTF-8.
    #[error("a string is not valid UTF-8")]
    InvalidString,
    /// A typed message carried a type this version does not define.
    #[error("unknown message type {0}")]
    InvalidMessage(u64),
    /// A field held a value the protocol does not allow.
    #[error("invalid value for {0}")]
    InvalidValue(&'static str),
    /// More items than the protocol allows (SETUP parameters).
    #[error("too many {0}")]
    TooMany(&'static str),
    /// A field exceeded its bound (hop count, path parts).
    #[error("{0} exceeds its bound")]
    BoundsExceeded(&'static str),
    /// A parameter id appeared twice.
    #[error("duplicate parameter id {0}")]
    Duplicate(u64),
    /// A parameter type the session's version does not define, where the version says to
    /// close the session on one (moq-transport 16 on).
    #[error("unknown parameter type {0}")]
    UnknownParameter(u64),
    /// A parameter in a message it is not defined for, where the version says to close the
    /// session on one (moq-transport 18).
    #[error("parameter type {0} is not allowed in this message")]
    ParameterNotAllowed(u64),
    /// The message does not exist in the session's version (a SETUP on moq-lite-04).
    #[error("{0} does not exist in this protocol version")]
    NotInVersion(&'static str),
}

/// Why a message could not be encoded: a value outside what the wire can carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A value does not fit a QUIC varint (at most 2^62 − 1), or a list or path is over its
    /// bound.
    #[error("{0} exceeds its bound")]
    BoundsExceeded(&'static str),
    /// A value the protocol does not allow (a zero timescale).
    #[error("invalid value for {0}")]
    InvalidValue(&'static str),
    /// The message does not exist in the session's version (TRACK_INFO on moq-lite-04):
    /// the caller asked for what the version cannot say.
    #[error("{0} does not exist in this protocol version")]
    NotInVersion(&'static str),
}

impl From<DecodeError> for crate::Error {
    /// The wire code a session closes with (or a stream resets with) on malformed input.
    fn from(error: DecodeError) -> Self {
        match error {
            DecodeError::BoundsExceeded(_) => Self::BoundsExceeded,
            DecodeError::TooMany(_) => Self::TooManyParameters,
            DecodeError::Duplicate(_) => Self::Duplicate,
            DecodeError::InvalidMessage(_) => Self::UnexpectedMessage,
            DecodeError::NotInVersion(_) => Self::Version,
            DecodeError::Short
            | DecodeError::Long
            | DecodeError::InvalidString
            | DecodeError::InvalidValue(_)
            | DecodeError::UnknownParameter(_)
            | DecodeError::ParameterNotAllowed(_) => Self::Decode,
        }
    }
}

impl From<EncodeError> for crate::Error {
    fn from(error: EncodeError) -> Self {
        match error {
            EncodeError::BoundsExceeded(_) => Self::BoundsExceeded,
            EncodeError::InvalidValue(_) => Self::Encode,
            EncodeError::NotInVersion(_) => Self::Version,
        }
    }
}
