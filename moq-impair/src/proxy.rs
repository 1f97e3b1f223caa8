//! The proxy: a UDP forwarder on a thread of its own that puts a [`Link`] in each
//! direction of each flow.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket as StdUdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::Impairment;
use crate::link::{Bottleneck, Drop, Fate, Link};

/// Where a proxy listens, where it forwards to, and what it does on the way.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The address clients send to (port 0: any free port; see [`Proxy::local_addr`]).
    pub listen: SocketAddr,
    /// The server every flow is forwarded to.
    pub upstream: SocketAddr,
    /// What the link does to packets from clients to the server.
    pub to_server: Impairment,
    /// What the link does to packets from the server to clients.
    pub to_client: Impairment,
    /// Every random decision follows from it: the same seed makes the same decisions
    /// for the same packets of each flow (flows are numbered in the order their first
    /// packet arrives).
    pub seed: u64,
    /// A flow that sent nothing either way for this long is forgotten (its upstream
    /// socket closed); its next packet starts a new flow, from a new port.
    pub flow_idle_timeout: Duration,
    /// The local address the proxy's upstream sockets bind (`None`: the kernel chooses).
    /// Upstream sockets are connected to the server, so the kernel drops any reply that
    /// does not come from the server's address, as a strict client does.
    pub upstream_bind: Option<IpAddr>,
}

impl ProxyConfig {
    /// A proxy on a free loopback port in front of `upstream`, with `impairment` in both
    /// directions.
    pub fn new(upstream: SocketAddr, impairment: Impairment, seed: u64) -> Self {
        let listen = match upstream {
            SocketAddr::V4(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
            SocketAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0)),
        };
        Self {
            listen,
            upstream,
            to_server: impairment.clone(),
            to_client: impairment,
            seed,
            flow_idle_timeout: Duration::from_secs(60),
            upstream_bind: None,
        }
    }
}

/// What happened to the packets in one direction so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Packets that reached the proxy.
    pub received: u64,
    /// Packets sent on (duplicates counted once more each).
    pub delivered: u64,
    /// Bytes of UDP payload sent on.
    pub delivered_bytes: u64,
    /// Packets lost at random.
    pub lost: u64,
    /// Packets dropped for exceeding the MTU.
    pub too_big: u64,
    /// Packets dropped by a full bottleneck queue.
    pub overflowed: u64,
    /// Packets dropped by a black hole.
    pub blackholed: u64,
    /// Packets held back for others to overtake.
    pub reordered: u64,
    /// Packets delivered twice.
    pub duplicated: u64,
    /// Packets delivered with a bit flipped.
    pub corrupted: u64,
    /// Sends the proxy's own socket refused (a full buffer): lost too.
    pub send_errors: u64,
    /// Packets that reached the proxy back to back with the one before them on their
    /// flow (within [`BACK_TO_BACK`](crate::BACK_TO_BACK)): the mean sending burst is
    /// `received / (received - back_to_back)`.
    pub back_to_back: u64,
    /// The most packets one flow sent back to back.
    pub largest_burst: u64,
}

/// What happened to the packets in both directions so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Clients to the server.
    pub to_server: DirectionStats,
    /// The server to clients.
    pub to_client: DirectionStats,
    /// Flows (client addresses) seen so far.
    pub flows: u64,
}

/// A running impairment proxy. Dropping it stops it (and closes its sockets).
#[derive(Debug)]
pub struct Proxy {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Binds the listening socket and starts forwarding on a thread of its own.
    pub fn start(config: ProxyConfig) -> io::Result<Self> {
        config
            .to_server
            .validate()
            .and_then(|()| config.to_client.validate())
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
        let listen = bind(config.listen)?;
        let local_addr = listen.local_addr()?;
        let shared = Arc::new(Shared {
            impairments: Mutex::new((config.to_server.clone(), config.to_client.clone())),
            to_server: Counters::default(),
            to_client: Counters::default(),
            flows: AtomicU64::new(0),
        });
        let (commands, receiver) = mpsc::unbounded_channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("impair-{}", local_addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    match UdpSocket::from_std(listen) {
                        Ok(listen) => {
                            Forwarder::new(listen, config, thread_shared)
                                .run(receiver)
                                .await
                        }
                        Err(error) => tracing::error!(%error, "the proxy's socket"),
                    }
                });
            })?;
        tracing::debug!(%local_addr, "impairment proxy started");
        Ok(Self {
            local_addr,
            shared,
            commands,
            thread: Some(thread),
        })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What happened to the packets so far.
    pub fn stats(&self) -> ProxyStats {
        ProxyStats {
            to_server: self.shared.to_server.snapshot(),
            to_client: self.shared.to_client.snapshot(),
            flows: self.shared.flows.load(Ordering::Relaxed),
        }
    }

    /// Changes what the link does from the next packet on (a path that goes dark and
    /// comes back, a rate that drops).
    pub fn set_impairment(&self, to_server: Impairment, to_client: Impairment) {
        *self
            .shared
            .impairments
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = (to_server, to_client);
    }

    /// Gives every flow a new upstream port, as a NAT that rebinds: the server sees each
    /// client's packets come from a new address.
    pub fn rebind(&self) {
        let _ = self.commands.send(Command::Rebind);
    }
}

impl std::ops::Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

enum Command {
    Rebind,
    Stop,
}

/// What the proxy's thread and its handle share.
#[derive(Debug)]
struct Shared {
    /// (clients to server, server to clients).
    impairments: Mutex<(Impairment, Impairment)>,
    to_server: Counters,
    to_client: Counters,
    flows: AtomicU64,
}

#[derive(Debug, Default)]
struct Counters {
    received: AtomicU64,
    delivered: AtomicU64,
    delivered_bytes: AtomicU64,
    lost: AtomicU64,
    too_big: AtomicU64,
    overflowed: AtomicU64,
    blackholed: AtomicU64,
    reordered: AtomicU64,
    duplicated: AtomicU64,
    corrupted: AtomicU64,
    send_errors: AtomicU64,
    back_to_back: AtomicU64,
    largest_burst: AtomicU64,
}

impl Counters {
    fn count(&self, counter: impl Fn(&Self) -> &AtomicU64) {
        counter(self).fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> DirectionStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        DirectionStats {
            received: read(&self.received),
            delivered: read(&self.delivered),
            delivered_bytes: read(&self.delivered_bytes),
            lost: read(&self.lost),
            too_big: read(&self.too_big),
            overflowed: read(&self.overflowed),
            blackholed: read(&self.blackholed),
            reordered: read(&self.reordered),
            duplicated: read(&self.duplicated),
            corrupted: read(&self.corrupted),
            send_errors: read(&self.send_errors),
            back_to_back: read(&self.back_to_back),
            largest_burst: read(&self.largest_burst),
        }
    }
}

/// Which way a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

/// One client address and its way to the server.
struct Flow {
    upstream: Arc<UdpSocket>,
    reader: tokio::task::JoinHandle<()>,
    to_server: Link,
    to_client: Link,
    last_active: Instant,
}

/// A packet waiting for its time to leave.
struct Scheduled {
    at: Instant,
    /// Arrival order: ties leave in it.
    sequence: u64,
    direction: Direction,
    client: SocketAddr,
    upstream: Arc<UdpSocket>,
    payload: Vec<u8>,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.sequence) == (other.at, other.sequence)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.sequence).cmp(&(other.at, other.sequence))
    }
}

/// The proxy's event loop and everything it owns.
struct Forwarder {
    listen: Arc<UdpSocket>,
    config: ProxyConfig,
    shared: Arc<Shared>,
    flows: HashMap<SocketAddr, Flow>,
    /// Numbers flows for their seeds.
    next_flow: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    next_sequence: u64,
    to_server_bottleneck: Bottleneck,
    to_client_bottleneck: Bottleneck,
    /// Datagrams from the server, with the client they are for, from the flows' readers.
    from_server: (
        mpsc::UnboundedSender<FromServer>,
        mpsc::UnboundedReceiver<FromServer>,
    ),
}

/// A datagram from the server, and the client it is for.
type FromServer = (SocketAddr, Vec<u8>);

/// The largest UDP payload there is.
const MAX_UDP_PAYLOAD: usize = 65_535;

impl Forwarder {
    fn new(listen: UdpSocket, config: ProxyConfig, shared: Arc<Shared>) -> Self {
        Self {
            listen: Arc::new(listen),
            config,
            shared,
            flows: HashMap::new(),
            next_flow: 0,
            queue: BinaryHeap::new(),
            next_sequence: 0,
            to_server_bottleneck: Bottleneck::default(),
            to_client_bottleneck: Bottleneck::default(),
            from_server: mpsc::unbounded_channel(),
        }
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut buffer = vec![0u8; MAX_UDP_PAYLOAD];
        let mut sweep = tokio::time::interval(Duration::from_secs(1));
        loop {
            let next = self.queue.peek().map(|Reverse(packet)| packet.at);
            let wake = tokio::time::Instant::from_std(next.unwrap_or_else(Instant::now));
            tokio::select! {
                biased;
                command = commands.recv() => match command {
                    Some(Command::Rebind) => self.rebind(),
                    Some(Command::Stop) | None => break,
                },
                () = tokio::time::sleep_until(wake), if next.is_some() => self.send_due().await,
                received = self.listen.recv_from(&mut buffer) => match received {
                    Ok((len, client)) => {
                        let payload = buffer[..len].to_vec();
                        self.admit(Direction::ToServer, client, payload);
                    }
                    Err(error) => tracing::debug!(%error, "the proxy's receive"),
                },
                Some((client, payload)) = self.from_server.1.recv() => {
                    self.admit(Direction::ToClient, client, payload);
                }
                _ = sweep.tick() => self.forget_idle_flows(),
            }
        }
        for flow in self.flows.values() {
            flow.reader.abort();
        }
    }

    /// Decides the fate of a packet and queues what arrives.
    fn admit(&mut self, direction: Direction, client: SocketAddr, mut payload: Vec<u8>) {
        let now = Instant::now();
        let (to_server, to_client) = self
            .shared
            .impairments
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if !self.ensure_flow(client) {
            return;
        }
        let Some(flow) = self.flows.get_mut(&client) else {
            return;
        };
        flow.last_active = now;
        let (link, impairment, bottleneck, counters, peer) = match direction {
            Direction::ToServer => (
                &mut flow.to_server,
                &to_server,
                &mut self.to_server_bottleneck,
                &self.shared.to_server,
                self.config.upstream,
            ),
            Direction::ToClient => (
                &mut flow.to_client,
                &to_client,
                &mut self.to_client_bottleneck,
                &self.shared.to_client,
                client,
            ),
        };
        counters.count(|c| &c.received);
        let ip_bytes = payload.len() + ip_and_udp_header(peer);
        let fate = link.decide(impairment, bottleneck, now, ip_bytes);
        let burst = link.sending_burst();
        if burst > 1 {
            counters.count(|c| &c.back_to_back);
        }
        counters.largest_burst.fetch_max(burst, Ordering::Relaxed);
        match fate {
            Fate::Dropped(why) => counters.count(|c| match why {
                Drop::Lost => &c.lost,
                Drop::TooBig => &c.too_big,
                Drop::Overflow => &c.overflowed,
                Drop::Blackhole => &c.blackholed,
            }),
            Fate::Delivered {
                at,
                reordered,
                corrupt_bit,
                duplicated,
            } => {
                if reordered {
                    counters.count(|c| &c.reordered);
                }
                if let Some(bit) = corrupt_bit.filter(|_| !payload.is_empty()) {
                    let bit = bit % (payload.len() * 8);
                    payload[bit / 8] ^= 1 << (bit % 8);
                    counters.count(|c| &c.corrupted);
                }
                let upstream = flow.upstream.clone();
                if duplicated {
                    counters.count(|c| &c.duplicated);
                }
                let copies = if duplicated { 2 } else { 1 };
                for copy in 0..copies {
                    let payload = if copy + 1 == copies {
                        std::mem::take(&mut payload)
                    } else {
                        payload.clone()
                    };
                    self.next_sequence += 1;
                    self.queue.push(Reverse(Scheduled {
                        at,
                        sequence: self.next_sequence,
                        direction,
                        client,
                        upstream: upstream.clone(),
                        payload,
                    }));
                }
            }
        }
    }

    /// Sends every packet whose time has come.
    async fn send_due(&mut self) {
        let now = Instant::now();
        while self
            .queue
            .peek()
            .is_some_and(|Reverse(packet)| packet.at <= now)
        {
            let Some(Reverse(packet)) = self.queue.pop() else {
                break;
            };
            let (sent, counters) = match packet.direction {
                Direction::ToServer => (
                    packet.upstream.send(&packet.payload).await,
                    &self.shared.to_server,
                ),
                Direction::ToClient => (
                    self.listen.send_to(&packet.payload, packet.client).await,
                    &self.shared.to_client,
                ),
            };
            match sent {
                Ok(_) => {
                    counters.count(|c| &c.delivered);
                    counters
                        .delivered_bytes
                        .fetch_add(packet.payload.len() as u64, Ordering::Relaxed);
                }
                Err(error) => {
                    tracing::debug!(%error, "the proxy could not send a packet on");
                    counters.count(|c| &c.send_errors);
                }
            }
        }
    }

    /// Starts the flow of `client` if it is new; false if it could not be.
    fn ensure_flow(&mut self, client: SocketAddr) -> bool {
        if !self.flows.contains_key(&client) {
            let upstream = match self.connect_upstream() {
                Ok(socket) => Arc::new(socket),
                Err(error) => {
                    tracing::warn!(%error, %client, "the proxy could not open an upstream socket");
                    return false;
                }
            };
            let index = self.next_flow;
            self.next_flow += 1;
            self.shared.flows.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%client, index, "impairment proxy: new flow");
            let reader = self.read_upstream(client, upstream.clone());
            self.flows.insert(
                client,
                Flow {
                    upstream,
                    reader,
                    to_server: Link::new(mix(self.config.seed, 2 * index)),
                    to_client: Link::new(mix(self.config.seed, 2 * index + 1)),
                    last_active: Instant::now(),
                },
            );
        }
        true
    }

    fn connect_upstream(&self) -> io::Result<UdpSocket> {
        let local: SocketAddr = match (self.config.upstream_bind, self.config.upstream) {
            (Some(ip), _) => (ip, 0).into(),
            (None, SocketAddr::V4(_)) => ([0, 0, 0, 0], 0).into(),
            (None, SocketAddr::V6(_)) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::from_std(bind(local)?)?;
        let std = socket.into_std()?;
        std.connect(self.config.upstream)?;
        UdpSocket::from_std(std)
    }

    /// A task that hands what the server sends on `upstream` to the event loop.
    fn read_upstream(
        &self,
        client: SocketAddr,
        upstream: Arc<UdpSocket>,
    ) -> tokio::task::JoinHandle<()> {
        let sender = self.from_server.0.clone();
        tokio::spawn(async move {
            let mut buffer = vec![0u8; MAX_UDP_PAYLOAD];
            loop {
                match upstream.recv(&mut buffer).await {
                    Ok(len) => {
                        if sender.send((client, buffer[..len].to_vec())).is_err() {
                            return;
                        }
                    }
                    // An ICMP error from the server's port (nothing listening yet):
                    // the next datagram may be answered.
                    Err(error) if error.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(error) => {
                        tracing::debug!(%error, "the proxy's upstream receive");
                        return;
                    }
                }
            }
        })
    }

    fn rebind(&mut self) {
        let clients: Vec<SocketAddr> = self.flows.keys().copied().collect();
        for client in clients {
            let upstream = match self.connect_upstream() {
                Ok(socket) => Arc::new(socket),
                Err(error) => {
                    tracing::warn!(%error, "the proxy could not rebind a flow");
                    continue;
                }
            };
            let reader = self.read_upstream(client, upstream.clone());
            if let Some(flow) = self.flows.get_mut(&client) {
                flow.reader.abort();
                flow.reader = reader;
                flow.upstream = upstream;
            }
        }
        tracing::debug!(
            flows = self.flows.len(),
            "impairment proxy: rebound every flow"
        );
    }

    fn forget_idle_flows(&mut self) {
        let timeout = self.config.flow_idle_timeout;
        self.flows.retain(|client, flow| {
            let keep = flow.last_active.elapsed() < timeout;
            if !keep {
                tracing::debug!(%client, "impairment proxy: idle flow forgotten");
                flow.reader.abort();
            }
            keep
        });
    }
}

/// A non-blocking UDP socket bound to `address`, with buffers large enough that the
/// proxy itself drops nothing under a burst.
fn bind(address: SocketAddr) -> io::Result<StdUdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(
        Domain::for_address(address),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    // Best effort: the kernel caps these at its own maximum.
    let _ = socket.set_recv_buffer_size(8 << 20);
    let _ = socket.set_send_buffer_size(8 << 20);
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    Ok(socket.into())
}

/// The bytes of IP and UDP header in front of a payload sent to `peer`.
fn ip_and_udp_header(peer: SocketAddr) -> usize {
    match peer {
        SocketAddr::V4(_) => 20 + 8,
        SocketAddr::V6(address) if address.ip().to_ipv4_mapped().is_some() => 20 + 8,
        SocketAddr::V6(_) => 40 + 8,
    }
}

/// A seed for stream `index` of `seed` (SplitMix64's finalizer): nearby indexes get
/// unrelated seeds.
fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on loopback, on a thread; returns its address.
    fn echo() -> SocketAddr {
        let socket = StdUdpSocket::bind("127.0.0.1:0").unwrap();
        let address = socket.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 2048];
            while let Ok((len, from)) = socket.recv_from(&mut buffer) {
                let _ = socket.send_to(&buffer[..len], from);
            }
        });
        address
    }

    /// How long a test waits for a packet or a counter: against hangs, with room for a
    /// machine busy enough to starve the proxy's thread for seconds.
    const PATIENCE: Duration = Duration::from_secs(30);

    fn client() -> StdUdpSocket {
        let socket = StdUdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(PATIENCE)).unwrap();
        socket
    }

    #[test]
    fn a_perfect_link_forwards_both_ways() {
        let proxy = Proxy::start(ProxyConfig::new(echo(), Impairment::perfect(), 1)).unwrap();
        let client = client();
        client.connect(proxy.local_addr()).unwrap();
        let mut buffer = [0u8; 64];
        for i in 0..10u8 {
            client.send(&[i; 32]).unwrap();
            let len = client.recv(&mut buffer).unwrap();
            assert_eq!(&buffer[..len], &[i; 32]);
        }
        // The counters move just after each send: the last one may still be on its way.
        let mut stats = proxy.stats();
        let start = std::time::Instant::now();
        while start.elapsed() < PATIENCE {
            if stats.to_client.delivered == 10 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
            stats = proxy.stats();
        }
        assert_eq!(stats.to_server.delivered, 10);
        assert_eq!(stats.to_client.delivered, 10);
        assert_eq!(stats.to_client.received, 10);
        assert_eq!(stats.flows, 1);
    }

    #[test]
    fn the_mtu_drops_what_is_too_big_and_rebinding_changes_the_source() {
        let server = StdUdpSocket::bind("127.0.0.1:0").unwrap();
        server.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut config =
            ProxyConfig::new(server.local_addr().unwrap(), "mtu=1280".parse().unwrap(), 1);
        config.to_client = Impairment::perfect();
        let proxy = Proxy::start(config).unwrap();
        let client = client();
        client.connect(proxy.local_addr()).unwrap();
        let mut buffer = [0u8; 2048];
        client.send(&[1; 1300]).unwrap(); // 1,328 bytes of IP packet: dropped
        client.send(&[2; 1252]).unwrap(); // 1,280: arrives
        let (len, first) = server.recv_from(&mut buffer).unwrap();
        assert_eq!(&buffer[..len], &[2; 1252]);
        assert_eq!(proxy.stats().to_server.too_big, 1);

        proxy.rebind();
        // The rebind is a command to the proxy's thread: wait until a packet shows it.
        let mut second = first;
        let start = std::time::Instant::now();
        while start.elapsed() < PATIENCE {
            client.send(&[3; 8]).unwrap();
            let (_, from) = server.recv_from(&mut buffer).unwrap();
            second = from;
            if second != first {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_ne!(second, first, "a rebound flow comes from a new port");
        server.send_to(b"back", second).unwrap();
        let len = client.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..len], b"back");
    }
}
