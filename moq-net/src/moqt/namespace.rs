//! Namespace discovery (§ "Namespace Discovery"): a publisher's PUBLISH_NAMESPACE and how
//! it ends, a subscriber's SUBSCRIBE_NAMESPACE (and 18's SUBSCRIBE_TRACKS), and the
//! NAMESPACE / NAMESPACE_DONE a subscriber hears back (16 on).

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::control::Control;
use super::fields::{Namespace, read_reason, read_track_name, write_reason, write_track_name};
use super::int::{read_int, write_int};
use super::message_params::{MessageParameters, Param};
use crate::coding::{DecodeError, EncodeError};

/// The parameters PUBLISH_NAMESPACE may carry.
pub const PUBLISH_NAMESPACE_PARAMETERS: &[Param] = &[Param::AuthorizationToken];

/// The parameters SUBSCRIBE_NAMESPACE may carry on `draft` (FORWARD on 16, where it may
/// ask for PUBLISHes; 18 moved those to SUBSCRIBE_TRACKS).
pub fn subscribe_namespace_parameters(draft: Draft) -> &'static [Param] {
    if draft.has_request_streams() {
        &[Param::AuthorizationToken]
    } else {
        &[Param::AuthorizationToken, Param::Forward]
    }
}

/// The parameters SUBSCRIBE_TRACKS may carry (18).
pub const SUBSCRIBE_TRACKS_PARAMETERS: &[Param] = &[Param::AuthorizationToken, Param::Forward];

/// PUBLISH_NAMESPACE (`0x06`, every draft): the sender publishes tracks under `namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishNamespace {
    /// Its request id.
    pub request_id: u64,
    /// The namespace.
    pub namespace: Namespace,
    /// Its parameters.
    pub parameters: MessageParameters,
}

impl Control for PublishNamespace {
    const NAME: &'static str = "PUBLISH_NAMESPACE";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x06)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        self.namespace.encode(buf, draft)?;
        self.parameters
            .encode(buf, draft, PUBLISH_NAMESPACE_PARAMETERS)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: read_int(buf, draft)?,
            namespace: Namespace::decode(buf, draft)?,
            parameters: MessageParameters::decode(buf, draft, PUBLISH_NAMESPACE_PARAMETERS)?,
        })
    }
}

/// Which published namespace a DONE or CANCEL is about: its namespace on 14, the request
/// that published it on 16.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publication {
    /// The namespace itself (14).
    Namespace(Namespace),
    /// The PUBLISH_NAMESPACE's request id (16).
    Request(u64),
}

impl Publication {
    fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        match (self, draft) {
            (Publication::Namespace(namespace), Draft::D14) => namespace.encode(buf, draft),
            (Publication::Request(id), Draft::D16) => write_int(buf, *id, draft, "request id"),
            _ => Err(EncodeError::NotInVersion(
                "this form of the published namespace",
            )),
        }
    }

    fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(if draft == Draft::D14 {
            Publication::Namespace(Namespace::decode(buf, draft)?)
        } else {
            Publication::Request(read_int(buf, draft)?)
        })
    }
}

/// The type of DONE and CANCEL on 14 and 16; on 18 a publication ends with its stream.
fn until_18(draft: Draft, kind: u64) -> Option<u64> {
    (!draft.has_request_streams()).then_some(kind)
}

/// PUBLISH_NAMESPACE_DONE (`0x09`, 14 and 16): the publisher withdraws the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishNamespaceDone {
    /// Which publication.
    pub publication: Publication,
}

impl Control for PublishNamespaceDone {
    const NAME: &'static str = "PUBLISH_NAMESPACE_DONE";

    fn message_type(draft: Draft) -> Option<u64> {
        until_18(draft, 0x09)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        self.publication.encode(buf, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            publication: Publication::decode(buf, draft)?,
        })
    }
}

/// PUBLISH_NAMESPACE_CANCEL (`0x0C`, 14 and 16): the receiver stops accepting
/// subscriptions for the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishNamespaceCancel {
    /// Which publication.
    pub publication: Publication,
    /// Why (REQUEST_ERROR's codes).
    pub code: u64,
    /// Why, in words.
    pub reason: String,
}

impl Control for PublishNamespaceCancel {
    const NAME: &'static str = "PUBLISH_NAMESPACE_CANCEL";

    fn message_type(draft: Draft) -> Option<u64> {
        until_18(draft, 0x0c)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        self.publication.encode(buf, draft)?;
        write_int(buf, self.code, draft, "error code")?;
        write_reason(buf, &self.reason, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            publication: Publication::decode(buf, draft)?,
            code: read_int(buf, draft)?,
            reason: read_reason(buf, draft)?,
        })
    }
}

/// What a SUBSCRIBE_NAMESPACE asks for (16): its `Subscribe Options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubscribeOptions {
    /// PUBLISH for each track under the prefix (`0x00`).
    Publish,
    /// NAMESPACE for each namespace under the prefix (`0x01`).
    #[default]
    Namespace,
    /// Both (`0x02`).
    Both,
}

/// SUBSCRIBE_NAMESPACE (`0x11` on 14 and 16, `0x50` on 18): the sender wants to hear of
/// the namespaces (and on 16 the tracks) under `prefix`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeNamespace {
    /// Its request id.
    pub request_id: u64,
    /// The namespace prefix (empty: every namespace, 16 on).
    pub prefix: Namespace,
    /// What it asks for (16 only).
    pub options: Option<SubscribeOptions>,
    /// Its parameters.
    pub parameters: MessageParameters,
}

impl Control for SubscribeNamespace {
    const NAME: &'static str = "SUBSCRIBE_NAMESPACE";

    fn message_type(draft: Draft) -> Option<u64> {
        Some(if draft.has_request_streams() {
            0x50
        } else {
            0x11
        })
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        self.prefix.encode(buf, draft)?;
        match (draft.has_subscribe_options(), self.options) {
            (true, Some(options)) => {
                let value = match options {
                    SubscribeOptions::Publish => 0,
                    SubscribeOptions::Namespace => 1,
                    SubscribeOptions::Both => 2,
                };
                write_int(buf, value, draft, "subscribe options")?;
            }
            (true, None) => return Err(EncodeError::InvalidValue("subscribe options")),
            (false, Some(_)) => return Err(EncodeError::NotInVersion("subscribe options")),
            (false, None) => {}
        }
        self.parameters
            .encode(buf, draft, subscribe_namespace_parameters(draft))
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_int(buf, draft)?;
        let prefix = Namespace::decode_prefix(buf, draft)?;
        let options = if draft.has_subscribe_options() {
            Some(match read_int(buf, draft)? {
                0 => SubscribeOptions::Publish,
                1 => SubscribeOptions::Namespace,
                2 => SubscribeOptions::Both,
                _ => return Err(DecodeError::InvalidValue("subscribe options")),
            })
        } else {
            None
        };
        Ok(Self {
            request_id,
            prefix,
            options,
            parameters: MessageParameters::decode(
                buf,
                draft,
                subscribe_namespace_parameters(draft),
            )?,
        })
    }
}

/// UNSUBSCRIBE_NAMESPACE (`0x14`, 14): the sender no longer wants to hear of `prefix`
/// (later drafts close the request's stream).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnsubscribeNamespace {
    /// The prefix of the SUBSCRIBE_NAMESPACE it ends.
    pub prefix: Namespace,
}

impl Control for UnsubscribeNamespace {
    const NAME: &'static str = "UNSUBSCRIBE_NAMESPACE";

    fn message_type(draft: Draft) -> Option<u64> {
        (draft == Draft::D14).then_some(0x14)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        self.prefix.encode(buf, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            prefix: Namespace::decode_prefix(buf, draft)?,
        })
    }
}

/// SUBSCRIBE_TRACKS (`0x51`, 18): the sender wants a PUBLISH for every track under
/// `prefix`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeTracks {
    /// Its request id.
    pub request_id: u64,
    /// The namespace prefix.
    pub prefix: Namespace,
    /// Its parameters.
    pub parameters: MessageParameters,
}

impl Control for SubscribeTracks {
    const NAME: &'static str = "SUBSCRIBE_TRACKS";

    fn message_type(draft: Draft) -> Option<u64> {
        draft.has_request_streams().then_some(0x51)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        self.prefix.encode(buf, draft)?;
        self.parameters
            .encode(buf, draft, SUBSCRIBE_TRACKS_PARAMETERS)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: read_int(buf, draft)?,
            prefix: Namespace::decode_prefix(buf, draft)?,
            parameters: MessageParameters::decode(buf, draft, SUBSCRIBE_TRACKS_PARAMETERS)?,
        })
    }
}

/// NAMESPACE (`0x08`, 16 on) and NAMESPACE_DONE (`0x0E`): on a SUBSCRIBE_NAMESPACE's
/// stream, a namespace under the prefix appeared or went away. `TYPE` is its message type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceNotice<const TYPE: u64> {
    /// The namespace's fields after the prefix.
    pub suffix: Namespace,
}

/// NAMESPACE (16 on).
pub type NamespaceAnnounced = NamespaceNotice<0x08>;
/// NAMESPACE_DONE (16 on).
pub type NamespaceDone = NamespaceNotice<0x0e>;

impl<const TYPE: u64> Control for NamespaceNotice<TYPE> {
    const NAME: &'static str = match TYPE {
        0x08 => "NAMESPACE",
        _ => "NAMESPACE_DONE",
    };

    fn message_type(draft: Draft) -> Option<u64> {
        (draft >= Draft::D16).then_some(TYPE)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        self.suffix.encode(buf, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            suffix: Namespace::decode_prefix(buf, draft)?,
        })
    }
}

/// PUBLISH_BLOCKED (`0x0F`, 18): on a SUBSCRIBE_TRACKS stream, a track under the prefix
/// exists but the publisher cannot PUBLISH it now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishBlocked {
    /// The track's namespace fields after the prefix.
    pub suffix: Namespace,
    /// The track's name.
    pub name: Bytes,
}

impl Control for PublishBlocked {
    const NAME: &'static str = "PUBLISH_BLOCKED";

    fn message_type(draft: Draft) -> Option<u64> {
        draft.has_request_streams().then_some(0x0f)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        self.suffix.encode(buf, draft)?;
        write_track_name(buf, &self.name, draft, &self.suffix)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let suffix = Namespace::decode_prefix(buf, draft)?;
        let name = read_track_name(buf, draft, &suffix)?;
        Ok(Self { suffix, name })
    }
}
