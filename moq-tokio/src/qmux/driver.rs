//! The task that moves one QMux connection's records between its carrier and the
//! sans-IO connection, and keeps its timer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use moqx_qmux::{Connection, QmuxConnection, Side};
use moqx_runtime::quiche_config::QuicLimits;
use tokio::io::{AsyncRead, AsyncWrite};

use super::carrier::{Arrived, ByteStream, Carrier};

/// Records taken from the carrier in one turn before the task yields to others.
const RECORDS_PER_TURN: usize = 64;

/// How long a closed connection waits for the peer to end its side after ending ours
/// (spec: draft-ietf-quic-qmux-02 §7.2, "SHOULD wait"), so that our last frames are not
/// lost to a reset.
const LINGER: Duration = Duration::from_secs(2);

/// Drives `connection` over `carrier` until it is closed and the carrier ended;
/// `keep_alive` also sends the carrier's own keep-alive that often (a WebSocket Ping,
/// which draft-00 peers, without QX_PING, answer).
pub(crate) fn drive<C: Carrier + Send>(
    carrier: C,
    connection: QmuxConnection,
    keep_alive: Option<Duration>,
) -> impl Future<Output = ()> + Send {
    Driver {
        carrier,
        connection,
        pending: None,
        timer: Box::pin(tokio::time::sleep(Duration::from_secs(3600))),
        keep_alive: keep_alive.map(|every| (every, Instant::now() + every)),
        state: State::Open,
    }
}

/// A connection of `side` speaking `draft` over a byte stream (TCP, TLS), with the QMux
/// configuration of `limits`, its driver spawned; `applications` go in its transport
/// parameters (plain TCP only).
pub(super) fn over_byte_stream<S>(
    stream: S,
    side: Side,
    draft: moqx_qmux::Version,
    applications: Vec<String>,
    limits: &QuicLimits,
) -> QmuxConnection
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let settings = moqx_runtime::qmux::config(limits);
    let limit = settings.max_record_size;
    let connection = QmuxConnection::new(Connection::new(
        side,
        draft,
        settings,
        applications,
        Instant::now(),
    ));
    let carrier = ByteStream::new(stream, draft.has_records(), limit);
    tokio::spawn(drive(carrier, connection.clone(), None));
    connection
}

/// Plain TCP's version negotiation (no ALPN, no subprotocol): each side lists the
/// moq-lite versions it speaks as application protocols in its transport parameters, and
/// the server's preference among those both list is the version. Starts a connection of
/// `side` over `stream` offering `versions`, waits for the peer's parameters, and returns
/// the connection with the version; a connection with none in common is closed (code
/// [`Version`](moqx_net::Error::Version)) and the error says what the peer listed.
pub(super) async fn in_band<S>(
    stream: S,
    side: Side,
    versions: &[moqx_net::coding::Version],
    limits: &QuicLimits,
) -> Result<(QmuxConnection, moqx_net::coding::Version), InBandError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let ours: Vec<String> = versions.iter().map(|v| v.alpn().to_owned()).collect();
    let connection = over_byte_stream(
        stream,
        side,
        moqx_runtime::qmux::TCP_DRAFT,
        ours.clone(),
        limits,
    );
    let parameters =
        moqx_kio::wait(|waiter| connection.with(|inner| inner.poll_parameters(waiter)))
            .await
            .map_err(|error| InBandError::Handshake(error.to_string()))?;
    let theirs = parameters.application_protocols;
    let chosen = match side {
        Side::Client => moqx_runtime::qmux::choose_in_band(&theirs, &ours),
        Side::Server => moqx_runtime::qmux::choose_in_band(&ours, &theirs),
    };
    match chosen {
        Some(version) => Ok((connection, version)),
        None => {
            connection
                .with(|inner| inner.close(moqx_net::Error::Version.to_code(), "no common version"));
            Err(InBandError::NoCommonVersion { theirs })
        }
    }
}

/// Why [`in_band`] found no version.
#[derive(Debug)]
pub(super) enum InBandError {
    /// The connection failed before the peer's transport parameters arrived.
    Handshake(String),
    /// The peer listed none of ours: what it listed.
    NoCommonVersion { theirs: Vec<String> },
}

enum State {
    Open,
    /// Our side is being ended; the peer's end is awaited until the deadline.
    Lingering(Instant),
    Done,
}

struct Driver<C> {
    carrier: C,
    connection: QmuxConnection,
    /// A record the carrier had no room for yet.
    pending: Option<Bytes>,
    timer: Pin<Box<tokio::time::Sleep>>,
    keep_alive: Option<(Duration, Instant)>,
    state: State,
}

impl<C: Carrier> Future for Driver<C> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            let now = Instant::now();
            match this.state {
                State::Done => return Poll::Ready(()),
                State::Lingering(deadline) => return this.linger(cx, deadline, now),
                State::Open => {}
            }
            if let Err(reason) = this.receive(cx, now) {
                this.connection
                    .with(|inner| inner.handle_carrier_closed(&reason));
            }
            if this.connection.timeout().is_some_and(|at| at <= now) {
                this.connection.on_timeout(now);
            }
            if let Err(reason) = this.send(cx, now) {
                this.connection
                    .with(|inner| inner.handle_carrier_closed(&reason));
                this.state = State::Done;
                continue;
            }
            if this.connection.closed().is_some() && this.pending.is_none() {
                this.state = State::Lingering(now + LINGER);
                continue;
            }
            let wake_at = [this.connection.timeout(), this.keep_alive.map(|(_, at)| at)]
                .into_iter()
                .flatten()
                .min();
            if let Some(at) = wake_at {
                this.timer
                    .as_mut()
                    .reset(tokio::time::Instant::from_std(at));
                if this.timer.as_mut().poll(cx).is_ready() {
                    continue;
                }
            }
            return Poll::Pending;
        }
    }
}

impl<C: Carrier> Driver<C> {
    /// Takes what arrived into the connection; `Err` when the carrier ended or failed.
    fn receive(&mut self, cx: &mut Context<'_>, now: Instant) -> Result<(), String> {
        for _ in 0..RECORDS_PER_TURN {
            match self.carrier.poll_arrived(cx) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Ok(Arrived::Record(record))) => {
                    self.connection.handle_record(record, now)
                }
                Poll::Ready(Ok(Arrived::Activity)) => {
                    self.connection.with(|inner| inner.handle_activity(now))
                }
                Poll::Ready(Ok(Arrived::End)) => {
                    return Err("the peer closed its side of the connection".to_owned());
                }
                Poll::Ready(Ok(Arrived::Malformed(reason))) => {
                    // Closed with FRAME_ENCODING_ERROR; nothing more is read.
                    self.connection
                        .with(|inner| inner.handle_malformed(&reason));
                    return Ok(());
                }
                Poll::Ready(Err(error)) => return Err(error),
            }
        }
        // More may be waiting: come back after the others had a turn.
        cx.waker().wake_by_ref();
        Ok(())
    }

    /// Moves the connection's records (and a keep-alive when due) into the carrier and
    /// flushes it.
    fn send(&mut self, cx: &mut Context<'_>, now: Instant) -> Result<(), String> {
        if let Some((every, at)) = self.keep_alive
            && at <= now
            && self.carrier.poll_ready(cx)?.is_ready()
        {
            self.carrier.send_keep_alive()?;
            self.keep_alive = Some((every, now + every));
        }
        loop {
            let record = match self.pending.take() {
                Some(record) => record,
                None => match self.connection.poll_transmit(cx.waker()) {
                    Some(record) => record,
                    None => break,
                },
            };
            match self.carrier.poll_ready(cx) {
                Poll::Ready(Ok(())) => self.carrier.send(record)?,
                Poll::Ready(Err(error)) => return Err(error),
                Poll::Pending => {
                    self.pending = Some(record);
                    break;
                }
            }
        }
        match self.carrier.poll_flush(cx) {
            Poll::Ready(Err(error)) => Err(error),
            _ => Ok(()),
        }
    }

    /// Ends our side, then reads (and drops) until the peer ends its own or the deadline.
    fn linger(&mut self, cx: &mut Context<'_>, deadline: Instant, now: Instant) -> Poll<()> {
        if now >= deadline || matches!(self.carrier.poll_shutdown(cx), Poll::Ready(Err(_))) {
            self.state = State::Done;
            return Poll::Ready(());
        }
        loop {
            match self.carrier.poll_arrived(cx) {
                Poll::Ready(Ok(Arrived::Record(_) | Arrived::Activity)) => continue,
                // Past a broken record nothing more can be read: wait for the end.
                Poll::Ready(Ok(Arrived::Malformed(_))) => break,
                Poll::Ready(_) => {
                    self.state = State::Done;
                    return Poll::Ready(());
                }
                Poll::Pending => break,
            }
        }
        self.timer
            .as_mut()
            .reset(tokio::time::Instant::from_std(deadline));
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.state = State::Done;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
