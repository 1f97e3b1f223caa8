//! Session termination codes: what a moq-transport session's close carries (§ "Session
//! Termination Error Codes" of each draft), and their one mapping to and from [`Error`].
//!
//! The three drafts share one table but for 0x7 TOO_MANY_REQUESTS, which 18 dropped with
//! request-id flow control. A code this table does not name is kept as
//! [`Termination::Unknown`]: draft 18 asks a receiver to treat it as INTERNAL_ERROR and
//! never to close over it.

use super::Draft;
use crate::Error;

/// A session termination code of moq-transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Termination {
    /// 0x0: the session closed without error.
    NoError,
    /// 0x1: an implementation error.
    InternalError,
    /// 0x2: the peer is not allowed what it asked for.
    Unauthorized,
    /// 0x3: the peer broke a rule of the protocol.
    ProtocolViolation,
    /// 0x4: a request id of the wrong parity, out of sequence or used twice.
    InvalidRequestId,
    /// 0x5: a track alias already in use.
    DuplicateTrackAlias,
    /// 0x6: a Key-Value-Pair that does not decode.
    KeyValueFormattingError,
    /// 0x7 (14, 16): a request id at or past the granted maximum.
    TooManyRequests,
    /// 0x8: the PATH parameter names no endpoint here.
    InvalidPath,
    /// 0x9: the PATH parameter is malformed.
    MalformedPath,
    /// 0x10: the peer did not close in time after GOAWAY.
    GoawayTimeout,
    /// 0x11: a control message (SETUP) did not arrive in time.
    ControlMessageTimeout,
    /// 0x12: a data stream stalled.
    DataStreamTimeout,
    /// 0x13: more authorization tokens registered than the cache holds.
    AuthTokenCacheOverflow,
    /// 0x14: an authorization token alias registered twice.
    DuplicateAuthTokenAlias,
    /// 0x15: no version both sides speak.
    VersionNegotiationFailed,
    /// 0x16: an authorization token that does not decode.
    MalformedAuthToken,
    /// 0x17: an authorization token alias never registered.
    UnknownAuthTokenAlias,
    /// 0x18: an authorization token past its lifetime.
    ExpiredAuthToken,
    /// 0x19: the AUTHORITY parameter names no authority here.
    InvalidAuthority,
    /// 0x1A: the AUTHORITY parameter is malformed.
    MalformedAuthority,
    /// A code the table does not name (or 0x7 on draft 18), kept as received.
    Unknown(u64),
}

impl Termination {
    /// The code on the wire.
    pub fn code(self) -> u64 {
        match self {
            Self::NoError => 0x0,
            Self::InternalError => 0x1,
            Self::Unauthorized => 0x2,
            Self::ProtocolViolation => 0x3,
            Self::InvalidRequestId => 0x4,
            Self::DuplicateTrackAlias => 0x5,
            Self::KeyValueFormattingError => 0x6,
            Self::TooManyRequests => 0x7,
            Self::InvalidPath => 0x8,
            Self::MalformedPath => 0x9,
            Self::GoawayTimeout => 0x10,
            Self::ControlMessageTimeout => 0x11,
            Self::DataStreamTimeout => 0x12,
            Self::AuthTokenCacheOverflow => 0x13,
            Self::DuplicateAuthTokenAlias => 0x14,
            Self::VersionNegotiationFailed => 0x15,
            Self::MalformedAuthToken => 0x16,
            Self::UnknownAuthTokenAlias => 0x17,
            Self::ExpiredAuthToken => 0x18,
            Self::InvalidAuthority => 0x19,
            Self::MalformedAuthority => 0x1A,
            Self::Unknown(code) => code,
        }
    }

    /// The termination `code` names on `draft`.
    pub fn from_code(code: u64, draft: Draft) -> Self {
        match code {
            0x0 => Self::NoError,
            0x1 => Self::InternalError,
            0x2 => Self::Unauthorized,
            0x3 => Self::ProtocolViolation,
            0x4 => Self::InvalidRequestId,
            0x5 => Self::DuplicateTrackAlias,
            0x6 => Self::KeyValueFormattingError,
            0x7 if draft.has_request_id_flow_control() => Self::TooManyRequests,
            0x8 => Self::InvalidPath,
            0x9 => Self::MalformedPath,
            0x10 => Self::GoawayTimeout,
            0x11 => Self::ControlMessageTimeout,
            0x12 => Self::DataStreamTimeout,
            0x13 => Self::AuthTokenCacheOverflow,
            0x14 => Self::DuplicateAuthTokenAlias,
            0x15 => Self::VersionNegotiationFailed,
            0x16 => Self::MalformedAuthToken,
            0x17 => Self::UnknownAuthTokenAlias,
            0x18 => Self::ExpiredAuthToken,
            0x19 => Self::InvalidAuthority,
            0x1A => Self::MalformedAuthority,
            other => Self::Unknown(other),
        }
    }
}

impl Error {
    /// The termination code a session closed with this error sends on `draft`: the one
    /// mapping from our error to the MOQT wire. What MOQT has no code for is an
    /// INTERNAL_ERROR, but for the errors a peer's bytes cause, which are its protocol
    /// violations.
    pub fn to_termination(self, draft: Draft) -> Termination {
        match self {
            Error::Cancel | Error::Closed => Termination::NoError,
            Error::Unauthorized => Termination::Unauthorized,
            Error::InvalidRequestId => Termination::InvalidRequestId,
            Error::TooManyRequests if draft.has_request_id_flow_control() => {
                Termination::TooManyRequests
            }
            Error::Timeout => Termination::ControlMessageTimeout,
            Error::Version | Error::UnknownAlpn => Termination::VersionNegotiationFailed,
            Error::ProtocolViolation
            | Error::Decode
            | Error::UnexpectedMessage
            | Error::UnexpectedStream
            | Error::InvalidRole
            | Error::Duplicate
            | Error::TooManyParameters
            | Error::BoundsExceeded
            | Error::TooManyRequests => Termination::ProtocolViolation,
            Error::Remote(code) => Termination::from_code(code, draft),
            _ => Termination::InternalError,
        }
    }

    /// The error a peer's termination code on `draft` names: the inverse of
    /// [`to_termination`](Self::to_termination) where that is one to one, and
    /// [`Error::Remote`] with the raw code for the rest.
    pub fn from_termination(code: u64, draft: Draft) -> Self {
        match Termination::from_code(code, draft) {
            Termination::NoError => Error::Cancel,
            Termination::Unauthorized => Error::Unauthorized,
            Termination::ProtocolViolation => Error::ProtocolViolation,
            Termination::InvalidRequestId => Error::InvalidRequestId,
            Termination::TooManyRequests => Error::TooManyRequests,
            Termination::ControlMessageTimeout => Error::Timeout,
            Termination::VersionNegotiationFailed => Error::Version,
            other => Error::Remote(other.code()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_round_trips_on_every_draft() {
        for draft in Draft::ALL {
            for code in 0..0x40 {
                let termination = Termination::from_code(code, draft);
                assert_eq!(termination.code(), code, "{draft:?} {code:#x}");
                let error = Error::from_termination(code, draft);
                assert_eq!(
                    error.to_termination(draft).code(),
                    code,
                    "{draft:?} {code:#x} through {error:?}"
                );
            }
        }
    }

    #[test]
    fn too_many_requests_is_named_only_where_request_ids_are_granted() {
        assert_eq!(
            Termination::from_code(0x7, Draft::D14),
            Termination::TooManyRequests
        );
        assert_eq!(
            Termination::from_code(0x7, Draft::D16),
            Termination::TooManyRequests
        );
        assert_eq!(
            Termination::from_code(0x7, Draft::D18),
            Termination::Unknown(0x7)
        );
        assert_eq!(
            Error::TooManyRequests.to_termination(Draft::D18),
            Termination::ProtocolViolation,
            "18 has no code for it (and no request-id window to exceed)"
        );
    }

    #[test]
    fn our_errors_take_the_drafts_codes() {
        let draft = Draft::D16;
        assert_eq!(Error::Cancel.to_termination(draft).code(), 0x0);
        assert_eq!(Error::Decode.to_termination(draft).code(), 0x3);
        assert_eq!(Error::InvalidRequestId.to_termination(draft).code(), 0x4);
        assert_eq!(Error::TooManyRequests.to_termination(draft).code(), 0x7);
        assert_eq!(Error::Timeout.to_termination(draft).code(), 0x11);
        assert_eq!(Error::Version.to_termination(draft).code(), 0x15);
        assert_eq!(Error::Transport.to_termination(draft).code(), 0x1);
        assert_eq!(Error::App(3).to_termination(draft).code(), 0x1);
    }
}
