//! One worker's endpoint at work: the endpoint task serving its socket, the task that
//! turns its established connections into requests, and the report of a worker that
//! died. Both server modes start their workers with it.

use std::sync::Arc;

use moqx_runtime::endpoint::Endpoint;
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::server::{Acceptor, Admitted};
use moqx_runtime::udp::UdpSocket;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::driver::{self, EndpointHandle};
use crate::{Error, Request, TokioRuntime};

/// Where a worker that died reports why.
pub(crate) type Failure = Arc<tokio::sync::watch::Sender<Option<String>>>;

/// Reports `ended` (a worker's endpoint task) to `failure` if it panicked.
pub(crate) fn report(ended: Result<(), tokio::task::JoinError>, worker: usize, failure: &Failure) {
    let Err(error) = ended else { return };
    if !error.is_panic() {
        return;
    }
    let payload = error.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    let reason = format!("worker {worker} panicked: {message}");
    tracing::error!(%reason, "a worker died, and its connections with it");
    failure.send_replace(Some(reason));
}

/// Starts one endpoint on the current runtime, with the task that turns its established
/// connections into requests; returns its handle and its task.
pub(crate) fn start_worker(
    socket: UdpSocket,
    endpoint: Endpoint,
    acceptor: Acceptor,
    requests: mpsc::UnboundedSender<Request>,
    runtime: TokioRuntime,
    recv_batch: usize,
) -> Result<(EndpointHandle, tokio::task::JoinHandle<()>), Error> {
    let (accepted_sender, accepted) = mpsc::unbounded_channel();
    let started = driver::start(socket, endpoint, Some(accepted_sender), recv_batch)?;
    tokio::spawn(sort_connections(accepted, requests, acceptor, runtime).in_current_span());
    Ok(started)
}

/// Turns established connections into requests: at once for raw QUIC, in a task of its
/// own for a WebTransport handshake.
async fn sort_connections(
    mut accepted: mpsc::UnboundedReceiver<QuicConnection>,
    requests: mpsc::UnboundedSender<Request>,
    acceptor: Acceptor,
    runtime: TokioRuntime,
) {
    while let Some(connection) = accepted.recv().await {
        match acceptor.admit(&runtime, connection) {
            Admitted::Request(request) => {
                let _ = requests.send(request);
            }
            Admitted::Handshake(handshaking) => {
                let requests = requests.clone();
                tokio::spawn(
                    async move {
                        if let Some(request) = handshaking.await {
                            let _ = requests.send(request);
                        }
                    }
                    .in_current_span(),
                );
            }
            Admitted::Refused => {}
        }
    }
}
