//! The peer's PUBLISH_NAMESPACE: each namespace it publishes becomes a broadcast in
//! [`SessionConfig::subscribe`](crate::session::SessionConfig::subscribe), whose tracks
//! are subscribed upstream when a local consumer asks (`upstream.rs`), until the peer
//! withdraws it: PUBLISH_NAMESPACE_DONE (14 by namespace, 16 by request id) or, on 18, the
//! end of the request's stream.
//!
//! Accepted whether or not this side asked (SUBSCRIBE_NAMESPACE): deployed publishers
//! announce unsolicited. A namespace that names no broadcast path, or one this session
//! may not publish at (a relay's scoped origin), is refused with the request alone; past
//! the session's bounds on announcements likewise (EXCESSIVE_LOAD on 18).

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;

use super::names;
use super::request_stream::{StreamEnd, poll_until_end};
use super::requests::Refuse;
use crate::Error;
use crate::model::{self, BroadcastProducer, Path};
use crate::moqt::{
    Control, Draft, Publication, PublishNamespace, PublishNamespaceDone, PublishNamespaceOk,
    RequestOk,
};
use crate::session::context::Context;
use crate::session::stream::{Reader, Writer};
use crate::session::subscriber::BroadcastRequests;
use crate::session::task::Spawn;
use crate::transport::{RecvStream, SendStream};

/// A namespace the peer published, accepted: where it lives and which publication of the
/// path it is (a later one at the same path replaces it).
#[derive(Debug, Clone)]
pub(crate) struct Accepted {
    pub(crate) path: Path,
    pub(super) generation: u64,
}

/// Accepts `request`: the broadcast is published locally and its track requests served.
/// Returns the encoded acceptance, for where replies go.
pub(super) fn accept(
    request: &PublishNamespace,
    cx: &mut Context,
) -> Result<(Accepted, Bytes), Refuse> {
    let draft = cx.moqt.as_ref().ok_or(Refuse::Internal)?.draft;
    let path = names::path_of(&request.namespace).ok_or(Refuse::DoesNotExist)?;
    let generation = publish_remote(&path, cx)?;
    tracing::debug!(%path, request_id = request.request_id, "the peer published a namespace");
    let ok = match draft {
        Draft::D14 => PublishNamespaceOk {
            request_id: request.request_id,
        }
        .to_vec(draft),
        _ => RequestOk {
            request_id: draft.has_reply_request_ids().then_some(request.request_id),
            ..RequestOk::default()
        }
        .to_vec(draft),
    }
    .map_err(|error| {
        tracing::debug!(%error, "could not encode the acceptance");
        Refuse::Internal
    })?;
    if let Some(moqt) = cx.moqt.as_mut()
        && !draft.has_request_streams()
    {
        moqt.published.insert(
            request.request_id,
            Accepted {
                path: path.clone(),
                generation,
            },
        );
    }
    Ok((Accepted { path, generation }, Bytes::from(ok)))
}

/// Publishes the peer's broadcast at `path` in the session's subscribe origin, its track
/// requests served upstream; returns which publication of the path it is.
pub(super) fn publish_remote(path: &Path, cx: &mut Context) -> Result<u64, Refuse> {
    let origin = cx.config.subscribe.clone().ok_or(Refuse::Uninterested)?;
    let broadcast = BroadcastProducer::on_demand();
    // moq-transport carries no hops: the peer is the publisher, one link away.
    broadcast.set_route(model::Route {
        hops: Vec::new(),
        cost: match cx.goaway {
            true => u64::MAX,
            false => cx.config.link_cost,
        },
    });
    let generation = cx
        .remote
        .insert(path.clone(), broadcast, |path, broadcast| {
            origin.publish(path.clone(), broadcast)
        })
        .map_err(Refuse::from_error)?;
    cx.spawned.push(Spawn::BroadcastRequests(BroadcastRequests {
        path: path.clone(),
        generation,
    }));
    Ok(generation)
}

/// The peer withdrew a namespace: its broadcast ends here (if it is still the one
/// accepted then).
pub(super) fn withdraw(accepted: &Accepted, cx: &mut Context) {
    let current = cx
        .remote
        .get(&accepted.path)
        .is_some_and(|remote| remote.generation == accepted.generation);
    if current {
        tracing::debug!(path = %accepted.path, "the peer withdrew a namespace");
        cx.remote.remove(&accepted.path);
    }
}

/// PUBLISH_NAMESPACE_DONE on the control stream (14, 16).
pub(super) fn on_done(done: PublishNamespaceDone, cx: &mut Context) {
    let Some(moqt) = cx.moqt.as_mut() else {
        return;
    };
    let accepted = match done.publication {
        Publication::Request(request_id) => moqt.published.remove(&request_id),
        Publication::Namespace(namespace) => {
            let path = names::path_of(&namespace);
            let found = moqt
                .published
                .iter()
                .find(|(_, accepted)| Some(&accepted.path) == path.as_ref())
                .map(|(id, _)| *id);
            found.and_then(|id| moqt.published.remove(&id))
        }
    };
    match accepted {
        Some(accepted) => {
            withdraw(&accepted, cx);
            if let Some(moqt) = cx.moqt.as_mut() {
                let _ = moqt.request_done();
            }
        }
        None => tracing::debug!("PUBLISH_NAMESPACE_DONE of no namespace accepted"),
    }
}

/// 18: an accepted namespace on its request stream, until the peer ends the stream.
pub(crate) struct NamespaceStream<S, R> {
    accepted: Accepted,
    writer: Writer<S>,
    reader: Reader<R>,
}

impl<S: SendStream, R: RecvStream> NamespaceStream<S, R> {
    pub(super) fn new(
        accepted: Accepted,
        mut writer: Writer<S>,
        reader: Reader<R>,
        ok: Bytes,
    ) -> Self {
        writer.queue(ok);
        Self {
            accepted,
            writer,
            reader,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        if let Poll::Ready(Err(_)) = self.writer.poll_flush(waiter) {
            withdraw(&self.accepted, cx);
            return Poll::Ready(Ok(()));
        }
        let draft = cx.moqt.as_ref().map_or(Draft::D18, |moqt| moqt.draft);
        // REQUEST_UPDATE and the like: nothing to change on an accepted namespace.
        let end = poll_until_end(&mut self.reader, waiter, draft, |frame| {
            tracing::debug!(
                kind = frame.kind,
                "a message on a namespace's stream, not applied"
            );
            Ok(())
        });
        match end {
            Poll::Ready(StreamEnd::Finished | StreamEnd::Reset) => {
                withdraw(&self.accepted, cx);
                let _ = self.writer.stream_mut().finish();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(StreamEnd::Malformed(error)) => {
                withdraw(&self.accepted, cx);
                Poll::Ready(Err(error))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
