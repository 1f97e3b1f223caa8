//! The interop runner's test cases (englishm/moq-interop-runner, `docs/tests/TEST-CASES.md`),
//! each as the document words it: its procedure, its success criteria, its timeout. Every
//! case runs on the draft the client was told to speak.

use std::time::Duration;

use bytes::Bytes;
use moqx_net::moqt::{
    Control, Draft, Frame, GroupOrder, Namespace, Publication, PublishNamespace,
    PublishNamespaceDone, PublishNamespaceError, PublishNamespaceOk, RequestError, RequestOk,
    Subscribe, SubscribeError, SubscribeOk,
};

use super::Target;
use super::peer::{Peer, RequestStream};

/// Every test case, in the document's order.
pub(crate) const ALL: [&str; 6] = [
    "setup-only",
    "announce-only",
    "publish-namespace-done",
    "subscribe-error",
    "announce-subscribe",
    "subscribe-before-announce",
];

/// The namespace the publishing cases announce, and the track subscribed.
const NAMESPACE: [&str; 2] = ["moq-test", "interop"];
const TRACK: &str = "test-track";

/// Runs test case `name`; `Err` says why it failed.
pub(crate) async fn run(name: &str, target: &Target) -> Result<(), String> {
    match name {
        "setup-only" => setup_only(target).await,
        "announce-only" => announce(target, false).await,
        "publish-namespace-done" => announce(target, true).await,
        "subscribe-error" => subscribe_error(target).await,
        "announce-subscribe" => announce_subscribe(target).await,
        "subscribe-before-announce" => subscribe_before_announce(target).await,
        other => Err(format!("no test case {other:?}")),
    }
}

/// `setup-only`: SETUP both ways, then a clean close. Timeout 2 s.
async fn setup_only(target: &Target) -> Result<(), String> {
    let peer = target.connect(Duration::from_secs(2)).await?;
    peer.close();
    Ok(())
}

/// `announce-only` and `publish-namespace-done`: PUBLISH_NAMESPACE answered with its OK
/// within 2 s; with `withdraw`, the namespace is then withdrawn (18: the request stream
/// cancelled; before it, PUBLISH_NAMESPACE_DONE) and the relay keeps the session.
async fn announce(target: &Target, withdraw: bool) -> Result<(), String> {
    let patience = Duration::from_secs(2);
    let mut peer = target.connect(patience).await?;
    let namespace = Namespace::from_strs(NAMESPACE);
    let mut stream = publish_namespace(&mut peer, &namespace, patience).await?;
    if withdraw {
        match stream.as_mut() {
            Some(stream) => {
                use moqx_net::transport::SendStream;
                stream.send.reset(0x1); // CANCELLED
                stream.replies.stop(0x1);
            }
            None => {
                let publication = match peer.draft {
                    Draft::D14 => Publication::Namespace(namespace),
                    _ => Publication::Request(0),
                };
                peer.send(&PublishNamespaceDone { publication }).await?;
            }
        }
        if let Some(error) = peer.closed_within(Duration::from_millis(200)).await {
            return Err(format!(
                "the relay closed the session after the withdrawal: {error}"
            ));
        }
    }
    peer.close();
    Ok(())
}

/// `subscribe-error`: SUBSCRIBE for a track nobody publishes is answered with an error
/// within 2 s (the expected outcome).
async fn subscribe_error(target: &Target) -> Result<(), String> {
    let patience = Duration::from_secs(2);
    let mut peer = target.connect(patience).await?;
    let namespace = Namespace::from_strs(["nonexistent", "namespace"]);
    let request_id = peer.take_request_id();
    let mut stream = peer.request(&subscribe(request_id, namespace)).await?;
    let reply = peer.reply(stream.as_mut(), patience).await?;
    match subscribe_outcome(&reply, peer.draft)? {
        Outcome::Refused(_) => {}
        Outcome::Accepted => return Err("expected an error; got SUBSCRIBE_OK".to_owned()),
    }
    peer.close();
    Ok(())
}

/// `announce-subscribe`: a publisher announces, a subscriber's SUBSCRIBE is routed to it
/// and answered SUBSCRIBE_OK. Timeout 3 s in all.
async fn announce_subscribe(target: &Target) -> Result<(), String> {
    let patience = Duration::from_secs(3);
    let mut publisher = target.connect(patience).await?;
    let namespace = Namespace::from_strs(NAMESPACE);
    let _announced = publish_namespace(&mut publisher, &namespace, patience).await?;
    let mut subscriber = target.connect(patience).await?;
    let request_id = subscriber.take_request_id();
    let mut stream = subscriber
        .request(&subscribe(request_id, namespace))
        .await?;
    // The publisher answers the relay's SUBSCRIBE; the subscriber hears SUBSCRIBE_OK.
    let subscribed = serve_one_subscribe(&mut publisher, patience);
    let reply = subscriber.reply(stream.as_mut(), patience);
    let (served, reply) = tokio::join!(subscribed, reply);
    let _subscription = served?;
    match subscribe_outcome(&reply?, subscriber.draft)? {
        Outcome::Accepted => {}
        Outcome::Refused(why) => return Err(format!("expected SUBSCRIBE_OK; got {why}")),
    }
    subscriber.close();
    publisher.close();
    Ok(())
}

/// `subscribe-before-announce`: a subscriber asks first, a publisher announces 500 ms
/// later; SUBSCRIBE_OK (the relay waited) and an error (it did not) both pass, if the
/// answer comes within 3.5 s.
async fn subscribe_before_announce(target: &Target) -> Result<(), String> {
    let patience = Duration::from_millis(3500);
    let namespace = Namespace::from_strs(NAMESPACE);
    let mut subscriber = target.connect(patience).await?;
    let request_id = subscriber.take_request_id();
    let mut stream = subscriber
        .request(&subscribe(request_id, namespace.clone()))
        .await?;
    let publish = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut publisher = target.connect(patience).await?;
        let announced = publish_namespace(&mut publisher, &namespace, patience).await?;
        // A relay that waited now subscribes: answered, so that the subscriber hears OK.
        let served = serve_one_subscribe(&mut publisher, Duration::from_secs(2)).await;
        Ok::<_, String>((publisher, announced, served))
    };
    let reply = subscriber.reply(stream.as_mut(), patience);
    let (published, reply) = tokio::join!(publish, reply);
    subscribe_outcome(&reply?, subscriber.draft)?;
    let (publisher, _announced, _subscription) = published?;
    subscriber.close();
    publisher.close();
    Ok(())
}

/// Sends PUBLISH_NAMESPACE for `namespace` and waits for its OK; the request's stream on
/// 18 (kept: dropping it would withdraw the namespace).
async fn publish_namespace(
    peer: &mut Peer,
    namespace: &Namespace,
    patience: Duration,
) -> Result<Option<RequestStream>, String> {
    let request_id = peer.take_request_id();
    let message = PublishNamespace {
        request_id,
        namespace: namespace.clone(),
        ..PublishNamespace::default()
    };
    let mut stream = peer.request(&message).await?;
    let reply = peer.reply(stream.as_mut(), patience).await?;
    let draft = peer.draft;
    let accepted = match draft {
        Draft::D14 => PublishNamespaceOk::from_frame(&reply, draft).is_ok(),
        _ => RequestOk::from_frame(&reply, draft).is_ok(),
    };
    if !accepted {
        let why = match draft {
            Draft::D14 => PublishNamespaceError::from_frame(&reply, draft).map(|error| {
                format!(
                    "PUBLISH_NAMESPACE_ERROR {:#x} {:?}",
                    error.code, error.reason
                )
            }),
            _ => RequestError::from_frame(&reply, draft)
                .map(|error| format!("REQUEST_ERROR {:#x} {:?}", error.code, error.reason)),
        }
        .unwrap_or_else(|_| format!("message type {:#x}", reply.kind));
        return Err(format!("expected the PUBLISH_NAMESPACE's OK; got {why}"));
    }
    Ok(stream)
}

/// As a publisher: reads the relay's SUBSCRIBE and answers SUBSCRIBE_OK; on 18 the
/// subscription's stream, kept open with it.
async fn serve_one_subscribe(
    publisher: &mut Peer,
    patience: Duration,
) -> Result<Option<RequestStream>, String> {
    let draft = publisher.draft;
    let (frame, mut stream) = publisher.next_request(patience).await?;
    let subscribe = Subscribe::from_frame(&frame, draft)
        .map_err(|error| format!("expected the relay's SUBSCRIBE: {error}"))?;
    if subscribe.name != TRACK.as_bytes() {
        return Err(format!("the relay subscribed to {:?}", subscribe.name));
    }
    let ok = SubscribeOk {
        request_id: draft
            .has_reply_request_ids()
            .then_some(subscribe.request_id),
        track_alias: 1,
        group_order: (draft == Draft::D14).then_some(GroupOrder::Ascending),
        ..SubscribeOk::default()
    };
    publisher.answer(stream.as_mut(), &ok).await?;
    Ok(stream)
}

/// SUBSCRIBE `request_id` for the test track in `namespace`, from the latest object.
fn subscribe(request_id: u64, namespace: Namespace) -> Subscribe {
    Subscribe {
        request_id,
        namespace,
        name: Bytes::from_static(TRACK.as_bytes()),
        ..Subscribe::default()
    }
}

/// What a SUBSCRIBE was answered with.
enum Outcome {
    Accepted,
    Refused(String),
}

/// Reads a reply to SUBSCRIBE: SUBSCRIBE_OK, or an error (REQUEST_ERROR, 14's
/// SUBSCRIBE_ERROR); anything else fails the test.
fn subscribe_outcome(reply: &Frame, draft: Draft) -> Result<Outcome, String> {
    if SubscribeOk::from_frame(reply, draft).is_ok() {
        return Ok(Outcome::Accepted);
    }
    let refused = match draft {
        Draft::D14 => SubscribeError::from_frame(reply, draft)
            .map(|error| format!("SUBSCRIBE_ERROR {:#x} {:?}", error.code, error.reason)),
        _ => RequestError::from_frame(reply, draft)
            .map(|error| format!("REQUEST_ERROR {:#x} {:?}", error.code, error.reason)),
    };
    refused.map(Outcome::Refused).map_err(|_| {
        format!(
            "expected SUBSCRIBE_OK or an error; got message type {:#x}",
            reply.kind
        )
    })
}
