//! The way from a harness's clients to its servers: the address servers bind, the one
//! clients dial, and the impairment proxy each connection crosses, if any.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use moq_impair::{Impairment, Proxy, ProxyConfig};

/// The bound on a handshake through an impairment proxy: a handshake that loses a burst
/// of packets waits out exponentially backed-off probe timeouts (1, 2, 4, 8 s …). Against
/// hangs, not a speed threshold.
const IMPAIRED_HANDSHAKE: Duration = Duration::from_secs(30);

/// The bound on a handshake over a perfect path: against hangs, with room for a machine
/// busy enough to starve a client for seconds.
const HANDSHAKE: Duration = Duration::from_secs(20);

pub(crate) struct Paths {
    /// The address servers bind.
    bind: IpAddr,
    /// The address clients reach servers at, when not the one they bind (a server bound
    /// to a wildcard address, reached at a second address of the host).
    dial: Option<IpAddr>,
    /// Every client reaches its server through an impairment proxy of its own with this
    /// impairment, seeded with the seed plus the connection's number (`None`: directly).
    impairment: Option<(Impairment, u64)>,
    /// Kept alive for the scenario.
    proxies: Vec<Proxy>,
}

#[allow(dead_code)] // each test file uses its part
impl Paths {
    /// Servers on IPv4 loopback, dialed directly.
    pub(crate) fn new() -> Self {
        Self {
            bind: Ipv4Addr::LOCALHOST.into(),
            dial: None,
            impairment: None,
            proxies: Vec::new(),
        }
    }

    /// Every connection through an impairment proxy of its own.
    pub(crate) fn impair(&mut self, impairment: Impairment, seed: u64) {
        self.impairment = Some((impairment, seed));
    }

    /// Servers bound to `address` (another loopback address, `::1` for IPv6).
    pub(crate) fn bind_to(&mut self, address: IpAddr) {
        self.bind = address;
    }

    /// Servers bound to `bound` (a wildcard address) and reached at `reached`, another
    /// address of the host, through a proxy (perfect unless impaired) whose upstream
    /// sockets are bound to loopback and connected to `reached`: the kernel drops any
    /// reply that does not come from `reached`, as a strict client does (RFC 9000 §9).
    pub(crate) fn reach_at(&mut self, bound: IpAddr, reached: IpAddr) {
        self.bind = bound;
        self.dial = Some(reached);
        if self.impairment.is_none() {
            self.impairment = Some((Impairment::perfect(), 1));
        }
    }

    /// The address a server binds (port 0: any).
    pub(crate) fn server_address(&self) -> SocketAddr {
        SocketAddr::new(self.bind, 0)
    }

    /// How long a client's handshake may take, and a step that includes one.
    pub(crate) fn handshake_timeout(&self) -> Duration {
        match self.impairment {
            Some(_) => IMPAIRED_HANDSHAKE,
            None => HANDSHAKE,
        }
    }

    /// The URL a client of `scheme` dials to reach the server bound at `server`: the
    /// server itself, or a new proxy in front of it.
    pub(crate) fn url(&mut self, scheme: &str, server: SocketAddr) -> String {
        let server = SocketAddr::new(self.dial.unwrap_or(server.ip()), server.port());
        let target = match &self.impairment {
            None => server,
            Some((impairment, seed)) => {
                let seed = seed + self.proxies.len() as u64;
                let mut config = ProxyConfig::new(server, impairment.clone(), seed);
                config.upstream_bind = self.dial.map(|_| loopback(server.ip()));
                let proxy = Proxy::start(config).expect("the impairment proxy starts");
                let address = proxy.local_addr();
                self.proxies.push(proxy);
                address
            }
        };
        let host = match target.ip() {
            IpAddr::V4(address) if address.is_loopback() => "localhost".to_string(),
            IpAddr::V4(address) => address.to_string(),
            IpAddr::V6(address) => format!("[{address}]"),
        };
        format!("{scheme}://{host}:{}/", target.port())
    }
}

/// The loopback address of `address`'s family.
fn loopback(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
    }
}
