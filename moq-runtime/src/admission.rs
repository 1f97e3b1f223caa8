//! Who an endpoint lets start a QUIC handshake: caps on connections, on handshakes in
//! progress and per client address, and QUIC Retry (address validation) once handshakes
//! pile up.
//!
//! A handshake in progress (half-open) costs a connection's state for up to the idle
//! timeout, and an Initial's source address can be forged. So half-open connections have a
//! cap of their own, apart from established ones (a flood of handshakes cannot take the
//! places of established sessions); past [`Admission::retry_above`] half-open connections,
//! a new client must first prove its address by echoing a Retry token (RFC 9000 §8.1.2);
//! and each address may hold at most [`Admission::max_per_address`] established
//! connections.
//!
//! The counts a policy is judged against live in a [`Gate`], which every worker of a
//! server shares: a server of four workers admits 10,000 connections in all, not 10,000
//! each, and a Retry token minted by one worker is good on another.
//!
//! Retry tokens are minted and checked here, statelessly: an HMAC-SHA256 (ring) over the
//! client's address, the time the token was issued, the connection ID the client first
//! chose and the one our Retry gave it, under a key drawn at random when the endpoint
//! starts. A token is good only for the connection ID its Retry gave: replayed with other
//! IDs it opens nothing, and with that one it reaches the connection that already exists.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ring::hmac;

/// Why admission turned a new connection away. The endpoint drops the Initial (a peer
/// that retries may find room later); it is an error only to whoever asked to count it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// As many established connections as the policy allows.
    #[error("connection limit ({0}) reached")]
    Full(usize),
    /// As many handshakes in progress as the policy allows.
    #[error("handshakes in progress at their limit ({0})")]
    HalfOpenFull(usize),
    /// The client's address holds as many connections as one address may.
    #[error("{address} holds its limit of {limit} connections")]
    AddressFull {
        /// The client's address.
        address: IpAddr,
        /// Its limit.
        limit: usize,
    },
}

/// An endpoint's admission policy. The defaults suit a public server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admission {
    /// The most established connections at once; while they are all taken, a new
    /// Initial is refused (dropped).
    pub max_connections: usize,
    /// The most handshakes in progress at once; an Initial past it is dropped.
    pub max_half_open: usize,
    /// Past this many handshakes in progress, a new client must first echo a Retry
    /// token; 0 validates every client's address (one more round trip for all).
    pub retry_above: usize,
    /// The most established connections from one IP address (a new Initial from it is
    /// refused while it holds them); 0 for no cap. Counted once a handshake completes, so
    /// spoofed Initials, which never complete, cannot use up another address's quota.
    pub max_per_address: usize,
}

impl Default for Admission {
    /// 10,000 connections, 1,024 handshakes in progress, Retry past 256 of them, no cap
    /// per address (clients behind one NAT share an address).
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_half_open: 1024,
            retry_above: 256,
            max_per_address: 0,
        }
    }
}

/// An admission policy with the counts it is judged against, shared by every endpoint
/// (worker) of one server. Cloning shares it.
///
/// It is touched only when a connection starts, completes its handshake or ends, never
/// per packet: atomics for the counts, a mutex for the per-address table.
#[derive(Clone)]
pub struct Gate {
    shared: Arc<GateState>,
}

struct GateState {
    policy: Admission,
    /// Established server connections.
    established: AtomicUsize,
    /// Server connections in their handshake.
    half_open: AtomicUsize,
    /// Established server connections per client address.
    per_address: Mutex<HashMap<IpAddr, usize>>,
    /// `None` if the random source failed at start: no Retry then.
    retry_tokens: Option<RetryTokens>,
}

impl Gate {
    /// A gate applying `policy`, with a fresh Retry key (token times counted from `now`).
    pub fn new(policy: Admission, now: Instant) -> Self {
        Self {
            shared: Arc::new(GateState {
                policy,
                established: AtomicUsize::new(0),
                half_open: AtomicUsize::new(0),
                per_address: Mutex::new(HashMap::new()),
                retry_tokens: RetryTokens::new(now)
                    .inspect_err(|error| tracing::warn!(%error, "no QUIC Retry: no random source"))
                    .ok(),
            }),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Admission {
        &self.shared.policy
    }

    /// Established server connections, over every endpoint sharing the gate.
    pub fn established(&self) -> usize {
        self.shared.established.load(Ordering::Acquire)
    }

    /// Server connections in their handshake, over every endpoint sharing the gate.
    pub fn half_open(&self) -> usize {
        self.shared.half_open.load(Ordering::Acquire)
    }

    /// Whether a new Initial from `from` may start a handshake as far as room goes (the
    /// connection cap and the address's cap).
    pub(crate) fn check_room(&self, from: IpAddr) -> Result<(), Refused> {
        let policy = &self.shared.policy;
        if self.established() >= policy.max_connections {
            return Err(Refused::Full(policy.max_connections));
        }
        let limit = policy.max_per_address;
        if limit > 0
            && lock(&self.shared.per_address)
                .get(&from)
                .copied()
                .unwrap_or(0)
                >= limit
        {
            return Err(Refused::AddressFull {
                address: from,
                limit,
            });
        }
        Ok(())
    }

    /// Whether a client that has not proved its address must do so first.
    pub(crate) fn wants_retry(&self) -> bool {
        self.half_open() >= self.shared.policy.retry_above
    }

    /// The Retry token minter, if there is a key.
    pub(crate) fn retry_tokens(&self) -> Option<&RetryTokens> {
        self.shared.retry_tokens.as_ref()
    }

    /// Counts a handshake starting, unless the cap on them is reached (checked and
    /// counted in one step, so that endpoints on other threads cannot both take the last
    /// place).
    pub(crate) fn begin_handshake(&self) -> Result<(), Refused> {
        let max = self.shared.policy.max_half_open;
        self.shared
            .half_open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < max).then_some(open + 1)
            })
            .map(|_| ())
            .map_err(|_| Refused::HalfOpenFull(max))
    }

    /// A handshake from `client` completed.
    pub(crate) fn established_from(&self, client: IpAddr) {
        self.shared.half_open.fetch_sub(1, Ordering::AcqRel);
        self.shared.established.fetch_add(1, Ordering::AcqRel);
        *lock(&self.shared.per_address).entry(client).or_default() += 1;
    }

    /// A server connection from `client` ended, established or not.
    pub(crate) fn ended(&self, client: IpAddr, established: bool) {
        if !established {
            self.shared.half_open.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        self.shared.established.fetch_sub(1, Ordering::AcqRel);
        let mut per_address = lock(&self.shared.per_address);
        if let Some(count) = per_address.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                per_address.remove(&client);
            }
        }
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("policy", &self.shared.policy)
            .field("established", &self.established())
            .field("half_open", &self.half_open())
            .finish_non_exhaustive()
    }
}

/// Locks `mutex`; a poisoned lock (a panic elsewhere while counting) still holds counts.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a Retry token is accepted after it was issued: the client echoes it at once.
const TOKEN_LIFETIME: Duration = Duration::from_secs(10);

/// Mints and checks Retry tokens.
pub(crate) struct RetryTokens {
    key: hmac::Key,
    /// Token times are counted from here.
    epoch: Instant,
}

/// The layout of a token: the issue time (milliseconds since the epoch, 8 bytes), the
/// original connection ID's length (1 byte) and bytes, then the tag.
const TIME_LEN: usize = 8;

impl RetryTokens {
    /// A fresh random key. Fails only if the system's random source does.
    pub(crate) fn new(epoch: Instant) -> Result<Self, getrandom::Error> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)?;
        Ok(Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, &secret),
            epoch,
        })
    }

    /// A token for a client at `address` whose first Initial went to `original_dcid`, and
    /// to whom our Retry gives `retry_scid`.
    pub(crate) fn mint(
        &self,
        address: SocketAddr,
        original_dcid: &[u8],
        retry_scid: &[u8],
        now: Instant,
    ) -> Vec<u8> {
        let issued = now.saturating_duration_since(self.epoch).as_millis() as u64;
        let mut token = Vec::with_capacity(TIME_LEN + 1 + original_dcid.len() + 32);
        token.extend_from_slice(&issued.to_be_bytes());
        token.push(original_dcid.len() as u8);
        token.extend_from_slice(original_dcid);
        let tag = hmac::sign(&self.key, &signed(&token, address, retry_scid));
        token.extend_from_slice(tag.as_ref());
        token
    }

    /// The original connection ID a valid token carries, on an Initial from `address` to
    /// `dcid`; `None` for a token that is malformed, forged, for another address or for
    /// another connection ID than its Retry gave, or too old.
    pub(crate) fn validate(
        &self,
        address: SocketAddr,
        dcid: &[u8],
        token: &[u8],
        now: Instant,
    ) -> Option<Vec<u8>> {
        let issued = u64::from_be_bytes(token.get(..TIME_LEN)?.try_into().ok()?);
        let cid_len = usize::from(*token.get(TIME_LEN)?);
        let body_len = TIME_LEN + 1 + cid_len;
        let (body, tag) = (token.get(..body_len)?, token.get(body_len..)?);
        hmac::verify(&self.key, &signed(body, address, dcid), tag).ok()?;
        let age = now
            .saturating_duration_since(self.epoch)
            .saturating_sub(Duration::from_millis(issued));
        (age <= TOKEN_LIFETIME).then(|| body[TIME_LEN + 1..].to_vec())
    }
}

/// What a token's tag covers: its body, the client's address, and the connection ID the
/// Retry gave.
fn signed(body: &[u8], address: SocketAddr, retry_scid: &[u8]) -> Vec<u8> {
    let mut bytes = body.to_vec();
    match address.ip() {
        std::net::IpAddr::V4(ip) => bytes.extend_from_slice(&ip.octets()),
        std::net::IpAddr::V6(ip) => bytes.extend_from_slice(&ip.octets()),
    }
    bytes.extend_from_slice(&address.port().to_be_bytes());
    bytes.push(retry_scid.len() as u8);
    bytes.extend_from_slice(retry_scid);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_valid_only_from_its_address_for_its_connection_id_unaltered_and_in_time() {
        let epoch = Instant::now();
        let tokens = RetryTokens::new(epoch).unwrap();
        let client: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let ours = [9u8; 16];
        let token = tokens.mint(client, &[7; 16], &ours, epoch);
        assert_eq!(
            tokens.validate(client, &ours, &token, epoch),
            Some(vec![7; 16])
        );

        let invalid = |address, dcid: &[u8], token: &[u8], now| {
            tokens.validate(address, dcid, token, now).is_none()
        };
        let elsewhere: SocketAddr = "192.0.2.2:4433".parse().unwrap();
        assert!(invalid(elsewhere, &ours, &token, epoch), "another address");
        // Regression: one token, replayed with fresh connection IDs, opened a half-open
        // connection each.
        assert!(
            invalid(client, &[8; 16], &token, epoch),
            "another connection ID"
        );
        let mut forged = token.clone();
        forged[TIME_LEN + 1] ^= 1;
        assert!(invalid(client, &ours, &forged, epoch), "altered");
        let late = epoch + TOKEN_LIFETIME + Duration::from_secs(1);
        assert!(invalid(client, &ours, &token, late), "too old");
        for cut in 0..token.len() {
            assert!(invalid(client, &ours, &token[..cut], epoch), "cut at {cut}");
        }
        let other = RetryTokens::new(epoch).unwrap();
        assert_eq!(
            other.validate(client, &ours, &token, epoch),
            None,
            "another endpoint's key"
        );
    }
}
