//! The error of the MoQ layer, and its one mapping to wire codes.
//!
//! The same codes reset streams and close sessions (spec: moq-lite-05, "Error codes"). The
//! model uses the subset that describes data going away (`Dropped`, `Closed`, `Lagged`, …);
//! the protocol layer uses the rest. The codec's detailed
//! [`DecodeError`](crate::coding::DecodeError) maps to [`Error::Decode`] (or to the more
//! specific code the spec names, such as `BoundsExceeded`).

/// An error of the MoQ layer. Each variant has exactly one moq-lite wire code
/// ([`Error::to_code`]) and one moq-transport termination code
/// ([`Error::to_termination`](crate::moqt::Termination)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Cancelled by the other side, or nobody wants the data any more (code 0).
    #[error("cancelled")]
    Cancel,
    /// The group is older than what is still being delivered (code 2).
    #[error("group is too old")]
    Old,
    /// Took too long (code 3).
    #[error("timed out")]
    Timeout,
    /// Not allowed by the session's authorization (code 6).
    #[error("unauthorized")]
    Unauthorized,
    /// A limit was exceeded (code 11).
    #[error("bounds exceeded")]
    BoundsExceeded,
    /// Something that must be unique was not (code 12).
    #[error("duplicate")]
    Duplicate,
    /// The broadcast or track does not exist (code 13).
    #[error("not found")]
    NotFound,
    /// A frame's payload did not match its declared size (code 14).
    #[error("frame payload does not match its declared size")]
    WrongSize,
    /// Not supported by this implementation (code 17).
    #[error("unsupported")]
    Unsupported,
    /// The producer was dropped without finishing (code 24).
    #[error("producer dropped without finishing")]
    Dropped,
    /// Closed normally, and nothing more will come (code 25).
    #[error("closed")]
    Closed,
    /// The reader fell behind what is retained (code 26).
    #[error("lagged behind the producer")]
    Lagged,
    /// A frame exceeds the configured maximum size (code 27).
    #[error("frame too large")]
    FrameTooLarge,
    /// Dropped from a cache to make room (code 31).
    #[error("evicted")]
    Evicted,
    /// The peer requires an extension this side does not speak (code 1).
    #[error("a required extension is missing")]
    RequiredExtension,
    /// The QUIC or WebTransport connection failed (code 4).
    #[error("transport error")]
    Transport,
    /// The peer sent bytes that do not decode (code 5).
    #[error("malformed message")]
    Decode,
    /// No version both sides speak (code 9).
    #[error("no common version")]
    Version,
    /// A stream of a type this side does not accept here (code 10).
    #[error("unexpected stream")]
    UnexpectedStream,
    /// The peer broke a rule of the protocol (code 15).
    #[error("protocol violation")]
    ProtocolViolation,
    /// A message that is not valid at this point of the stream (code 16).
    #[error("unexpected message")]
    UnexpectedMessage,
    /// A message could not be encoded, such as a field over its limit (code 18).
    #[error("could not encode a message")]
    Encode,
    /// A SETUP with more parameters than allowed (code 19).
    #[error("too many parameters")]
    TooManyParameters,
    /// The peer asked for something its role does not allow (code 20).
    #[error("invalid role")]
    InvalidRole,
    /// The negotiated protocol is not one this side speaks (code 21).
    #[error("unknown ALPN")]
    UnknownAlpn,
    /// Frame timestamps that do not fit the track (code 29).
    #[error("timestamp mismatch")]
    TimestampMismatch,
    /// No route to the requested broadcast without a loop (code 30).
    #[error("unroutable")]
    Unroutable,
    /// A moq-transport request id of the wrong parity, out of sequence or used twice (MOQT
    /// termination 0x4; moq-lite has no request ids: code 15, a protocol violation).
    #[error("invalid request id")]
    InvalidRequestId,
    /// A moq-transport request past the request ids the peer was granted (MOQT termination
    /// 0x7 on drafts 14 and 16; code 11 on moq-lite, bounds exceeded).
    #[error("too many requests")]
    TooManyRequests,
    /// An application-defined error; on the wire `64 + code`.
    #[error("application error {0}")]
    App(u16),
    /// A code received from the peer that this implementation does not name.
    #[error("remote error code {0}")]
    Remote(u64),
}

impl Error {
    /// The wire code: a stream reset code or a session close code.
    pub fn to_code(self) -> u64 {
        match self {
            Self::Cancel => 0,
            Self::Old => 2,
            Self::Timeout => 3,
            Self::Unauthorized => 6,
            Self::BoundsExceeded => 11,
            Self::Duplicate => 12,
            Self::NotFound => 13,
            Self::WrongSize => 14,
            Self::Unsupported => 17,
            Self::Dropped => 24,
            Self::Closed => 25,
            Self::Lagged => 26,
            Self::FrameTooLarge => 27,
            Self::Evicted => 31,
            Self::RequiredExtension => 1,
            Self::Transport => 4,
            Self::Decode => 5,
            Self::Version => 9,
            Self::UnexpectedStream => 10,
            Self::ProtocolViolation => 15,
            Self::UnexpectedMessage => 16,
            Self::Encode => 18,
            Self::TooManyParameters => 19,
            Self::InvalidRole => 20,
            Self::UnknownAlpn => 21,
            Self::TimestampMismatch => 29,
            Self::Unroutable => 30,
            Self::InvalidRequestId => 15,
            Self::TooManyRequests => 11,
            Self::App(code) => 64 + u64::from(code),
            Self::Remote(code) => code,
        }
    }

    /// The error a wire code names. Codes this implementation does not name become
    /// [`Error::Remote`], so `from_code(code).to_code() == code` for every code.
    pub fn from_code(code: u64) -> Self {
        match code {
            0 => Self::Cancel,
            2 => Self::Old,
            3 => Self::Timeout,
            6 => Self::Unauthorized,
            11 => Self::BoundsExceeded,
            12 => Self::Duplicate,
            13 => Self::NotFound,
            14 => Self::WrongSize,
            17 => Self::Unsupported,
            24 => Self::Dropped,
            25 => Self::Closed,
            26 => Self::Lagged,
            27 => Self::FrameTooLarge,
            31 => Self::Evicted,
            1 => Self::RequiredExtension,
            4 => Self::Transport,
            5 => Self::Decode,
            9 => Self::Version,
            10 => Self::UnexpectedStream,
            15 => Self::ProtocolViolation,
            16 => Self::UnexpectedMessage,
            18 => Self::Encode,
            19 => Self::TooManyParameters,
            20 => Self::InvalidRole,
            21 => Self::UnknownAlpn,
            29 => Self::TimestampMismatch,
            30 => Self::Unroutable,
            64..=0x1003F => Self::App((code - 64) as u16),
            other => Self::Remote(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for code in (0..200).chain([0x1003F, 0x10040, u64::from(u32::MAX)]) {
            assert_eq!(Error::from_code(code).to_code(), code, "code {code}");
        }
    }

    #[test]
    fn named_codes_match_the_spec() {
        assert_eq!(Error::Cancel.to_code(), 0);
        assert_eq!(Error::Dropped.to_code(), 24);
        assert_eq!(Error::Lagged.to_code(), 26);
        assert_eq!(Error::Evicted.to_code(), 31);
        assert_eq!(Error::Decode.to_code(), 5);
        assert_eq!(Error::ProtocolViolation.to_code(), 15);
        assert_eq!(Error::Unroutable.to_code(), 30);
        assert_eq!(Error::from_code(28), Error::Remote(28), "28 is reserved");
        assert_eq!(Error::App(1).to_code(), 65);
        assert_eq!(Error::from_code(65), Error::App(1));
        assert_eq!(Error::from_code(1000), Error::App(936));
        assert_eq!(Error::from_code(0x10040), Error::Remote(0x10040));
    }
}
