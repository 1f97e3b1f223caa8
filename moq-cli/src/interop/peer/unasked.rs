//! What a relay may send a client at any time, unasked, that no test step waits for.
//! Deployed relays do: moq-dev's relay asks every client for its namespaces
//! (SUBSCRIBE_NAMESPACE) and tells it of the namespaces it has (PUBLISH_NAMESPACE,
//! unsolicited on 14 and 16), before the reply a step waits for. A request of the relay's
//! is accepted, as a well-behaved client accepts it; a notice is read past.

use moqx_net::moqt::{
    Control, Draft, Frame, NamespaceAnnounced, NamespaceDone, PublishNamespace,
    PublishNamespaceDone, PublishNamespaceOk, RequestOk, SubscribeNamespace, SubscribeNamespaceOk,
};

use super::{Peer, RequestStream};

/// Answers `frame` if it is one of the relay's unasked messages (on `stream`, where it
/// came on a stream of its own: 18); returns whether it was.
pub(crate) async fn answer(
    peer: &mut Peer,
    frame: &Frame,
    stream: Option<&mut RequestStream>,
) -> Result<bool, String> {
    let draft = peer.draft;
    let is = |kind: Option<u64>| kind == Some(frame.kind);
    let decoding = |name: &str, error: moqx_net::coding::DecodeError| {
        format!("the relay's {name} does not decode: {error}")
    };
    // A request of the relay's: its id, and whether it asks for our namespaces.
    let request = if is(SubscribeNamespace::message_type(draft)) {
        let request = SubscribeNamespace::from_frame(frame, draft)
            .map_err(|error| decoding(SubscribeNamespace::NAME, error))?;
        Some((request.request_id, true))
    } else if is(PublishNamespace::message_type(draft)) {
        let request = PublishNamespace::from_frame(frame, draft)
            .map_err(|error| decoding(PublishNamespace::NAME, error))?;
        Some((request.request_id, false))
    } else {
        None
    };
    if let Some((request_id, subscribes)) = request {
        match (draft, subscribes) {
            (Draft::D14, true) => {
                peer.answer(stream, &SubscribeNamespaceOk { request_id })
                    .await?;
            }
            (Draft::D14, false) => {
                peer.answer(stream, &PublishNamespaceOk { request_id })
                    .await?;
            }
            _ => peer.answer(stream, &request_ok(draft, request_id)).await?,
        }
        return Ok(true);
    }
    Ok(is(NamespaceAnnounced::message_type(draft))
        || is(NamespaceDone::message_type(draft))
        || is(PublishNamespaceDone::message_type(draft)))
}

/// REQUEST_OK for request `request_id` (16 names it; on 18 its stream does).
fn request_ok(draft: Draft, request_id: u64) -> RequestOk {
    RequestOk {
        request_id: draft.has_reply_request_ids().then_some(request_id),
        ..RequestOk::default()
    }
}
