//! The moq-transport drafts this codec speaks, and what each carries.
//!
//! As in the moq-lite codec ([`crate::coding::Version`]), every difference between drafts is
//! a question asked of the [`Draft`] (`has_*`), never a draft compared by number at the call
//! site.

use std::fmt;

/// An IETF moq-transport draft: what the codec speaks on a session. Chosen by ALPN (raw
/// QUIC) or `WT-Available-Protocols` (WebTransport) from draft 15 on; draft 14 shares the
/// ALPN `moq-00` with every draft before it and names its version in CLIENT_SETUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Draft {
    /// draft-ietf-moq-transport-14 (ALPN `moq-00`, version `0xff00000e` in CLIENT_SETUP):
    /// one bidirectional control stream, request ids with MAX_REQUEST_ID flow control,
    /// per-message OK and ERROR replies, absolute parameter types.
    D14,
    /// draft-ietf-moq-transport-16 (ALPN `moqt-16`): -14's streams, with the version taken
    /// from the ALPN, the generic REQUEST_OK / REQUEST_ERROR replies and delta-encoded
    /// parameter types.
    D16,
    /// draft-ietf-moq-transport-18 (ALPN `moqt-18`): a unidirectional control stream each
    /// way opened by one SETUP, one bidirectional stream per request, and the
    /// leading-ones integers of up to 64 bits (`vi64`).
    D18,
}

impl Draft {
    /// Every draft, oldest first.
    pub const ALL: [Draft; 3] = [Draft::D14, Draft::D16, Draft::D18];

    /// The ALPN (raw QUIC) and WebTransport protocol string of this draft.
    pub fn alpn(self) -> &'static str {
        match self {
            Draft::D14 => "moq-00",
            Draft::D16 => "moqt-16",
            Draft::D18 => "moqt-18",
        }
    }

    /// The draft an ALPN names, if this codec speaks it. `moq-00` is every draft up to 14
    /// (the version is in CLIENT_SETUP); the one of them spoken here is 14.
    pub fn from_alpn(alpn: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|draft| draft.alpn() == alpn)
    }

    /// The version number of this draft in CLIENT_SETUP and SERVER_SETUP: `0xff000000`
    /// plus the draft number (§ "Versions"). Only draft 14 carries it on the wire.
    pub fn version_number(self) -> u64 {
        0xff00_0000
            + match self {
                Draft::D14 => 14,
                Draft::D16 => 16,
                Draft::D18 => 18,
            }
    }

    /// CLIENT_SETUP lists the supported versions and SERVER_SETUP names the selected one
    /// (14). From 15 on the ALPN negotiates the version and SETUP carries none.
    pub fn has_setup_versions(self) -> bool {
        self == Draft::D14
    }

    /// One SETUP message type for both sides (`0x2F00`, 18), in place of CLIENT_SETUP
    /// (`0x20`) and SERVER_SETUP (`0x21`).
    pub fn has_unified_setup(self) -> bool {
        self >= Draft::D18
    }

    /// Each side opens a unidirectional control stream, and every request opens a
    /// bidirectional stream of its own (18). Before it, one client-initiated bidirectional
    /// stream carries every control message.
    pub fn has_request_streams(self) -> bool {
        self >= Draft::D18
    }

    /// Integers are `vi64`: the count of leading one bits of the first byte gives the
    /// length, 1 to 9 bytes, any 64-bit value (18). Before it, QUIC varints (RFC 9000 §16),
    /// at most 2^62 − 1.
    pub fn has_vi64(self) -> bool {
        self >= Draft::D18
    }

    /// Key-Value-Pair types are deltas from the previous pair's type (16 on); in 14 each
    /// pair carries its type.
    pub fn has_delta_types(self) -> bool {
        self >= Draft::D16
    }

    /// Messages that carry parameters prefix them with their count (14, 16). SETUP on 18
    /// has none: its options run to the end of the message.
    pub fn has_setup_parameter_count(self) -> bool {
        self < Draft::D18
    }

    /// Request-id flow control: the MAX_REQUEST_ID setup parameter and message, and
    /// REQUESTS_BLOCKED (14, 16). Draft 18 has none: a request is a stream, and QUIC's
    /// stream limit bounds them.
    pub fn has_request_id_flow_control(self) -> bool {
        self < Draft::D18
    }

    /// Replies name the request they answer by its id (14, 16: every message shares one
    /// control stream). From 18 a reply travels on its request's stream and carries none;
    /// requests still carry theirs.
    pub fn has_reply_request_ids(self) -> bool {
        self < Draft::D18
    }

    /// GOAWAY carries a timeout, and on the control stream the first unprocessed request
    /// id (18).
    pub fn has_goaway_timeout(self) -> bool {
        self >= Draft::D18
    }

    /// An AbsoluteRange filter carries its end group as a distance from its start group
    /// (18); before it, the end group itself.
    pub fn has_end_group_delta(self) -> bool {
        self >= Draft::D18
    }

    /// Message parameters have an encoding per type (one byte, an integer, a location,
    /// bytes, a namespace), and a receiver closes the session on one it does not know (18).
    /// Before it they are Key-Value-Pairs, and 14 ignores unknown ones.
    pub fn has_typed_message_parameters(self) -> bool {
        self >= Draft::D18
    }

    /// A message parameter this draft does not define closes the session (16 on); 14
    /// ignores it.
    pub fn refuses_unknown_message_parameters(self) -> bool {
        self >= Draft::D16
    }

    /// A known message parameter in a message it is not defined for closes the session
    /// (18); before it, it is ignored.
    pub fn refuses_misplaced_message_parameters(self) -> bool {
        self >= Draft::D18
    }

    /// Subscriber priority, group order, forward and the filter travel as message
    /// parameters (16 on); on 14 they are fields of SUBSCRIBE and its kin.
    pub fn has_subscription_parameters(self) -> bool {
        self >= Draft::D16
    }

    /// SUBSCRIBE_NAMESPACE opens a bidirectional stream of its own, where its replies and
    /// namespaces travel (16; 18 does so for every request). On 14 it is a control
    /// message like any other.
    pub fn has_subscribe_namespace_stream(self) -> bool {
        self != Draft::D14
    }

    /// REQUEST_ERROR may carry a Redirect, under code REDIRECT (18).
    pub fn has_redirect(self) -> bool {
        self >= Draft::D18
    }

    /// REQUEST_OK ends with track properties (18).
    pub fn has_reply_properties(self) -> bool {
        self >= Draft::D18
    }

    /// SUBSCRIBE_NAMESPACE says whether it wants PUBLISHes, NAMESPACEs or both (16); 18
    /// splits the two into SUBSCRIBE_NAMESPACE and SUBSCRIBE_TRACKS.
    pub fn has_subscribe_options(self) -> bool {
        self == Draft::D16
    }

    /// A subgroup header or datagram may leave its priority out, inheriting the
    /// subscription's (16 on; 14 always carries it).
    pub fn has_default_priority(self) -> bool {
        self >= Draft::D16
    }

    /// SUBGROUP_HEADER's FIRST_OBJECT bit (18).
    pub fn has_first_object_bit(self) -> bool {
        self >= Draft::D18
    }

    /// On a fetch stream, group and object ids after the first object are deltas, the
    /// group's in the FETCH's group order (18); on 16 they are absolute.
    pub fn has_fetch_deltas(self) -> bool {
        self >= Draft::D18
    }

    /// A track's namespace may have no fields (18); before it, 1 to 32.
    pub fn has_empty_namespace(self) -> bool {
        self >= Draft::D18
    }

    /// A namespace prefix (SUBSCRIBE_NAMESPACE) may be written empty, every namespace (16
    /// on); 14 asks for 1 to 32 fields (one with none is read all the same:
    /// [`Namespace::decode_prefix`](super::Namespace::decode_prefix)).
    pub fn has_empty_prefix(self) -> bool {
        self >= Draft::D16
    }

    /// Every namespace field holds at least one byte (16 on); 14 allows empty fields.
    pub fn has_nonempty_namespace_fields(self) -> bool {
        self >= Draft::D16
    }

    /// The setup parameter type of MOQT_IMPLEMENTATION: `0x07` from 16 on. Draft 14's text
    /// gives it `0x05`, AUTHORITY's type; this codec reads `0x05` as AUTHORITY there and
    /// never sends an implementation name on 14.
    pub fn implementation_parameter(self) -> Option<u64> {
        (self >= Draft::D16).then_some(0x07)
    }
}

impl fmt::Display for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "moq-transport-{}", self.version_number() - 0xff00_0000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_draft_has_its_own_alpn_and_reads_back() {
        for draft in Draft::ALL {
            assert_eq!(Draft::from_alpn(draft.alpn()), Some(draft));
        }
        assert_eq!(Draft::from_alpn("moqt-17"), None);
        assert_eq!(Draft::from_alpn("moq-lite-05"), None);
    }

    #[test]
    fn version_numbers_follow_the_draft_numbering() {
        assert_eq!(Draft::D14.version_number(), 0xff00_000e);
        assert_eq!(Draft::D18.version_number(), 0xff00_0012);
        assert_eq!(Draft::D16.to_string(), "moq-transport-16");
    }
}
