//! Stateless resets (RFC 9000 §10.3): how a server that lost a connection (it restarted,
//! or it forgot the connection) tells the peer at once, instead of leaving it to find out
//! when its idle timeout runs out.
//!
//! Every connection ID a server issues comes with a 16-byte reset token, and the token is
//! a function of the ID under a key: HMAC-SHA256 (ring), truncated. A packet that arrives
//! for an ID the endpoint does not know is answered with a packet that ends in that ID's
//! token; the peer, which holds the token, recognises it and drops the connection. The
//! key must outlive the process, or a restarted server's tokens would be new ones the
//! peer has never seen: by default it is derived from the TLS certificate's private key
//! (the same certificate after a restart, the same tokens), and it can be given.
//!
//! What quiche checks (0.30): a client connection compares a packet it cannot decrypt
//! with the token of the server's *first* connection ID, the one in its transport
//! parameters; a server connection checks nothing (clients send no token there). So the
//! side that learns at once is a client or a dialing relay whose server restarted; a
//! server whose client vanished waits for the idle timeout.

use std::fmt;

use ring::hmac;

use crate::tls::Certificate;

/// The shortest stateless reset (RFC 9000 §10.3): a first byte and 4 unpredictable bytes,
/// so that it can pass for a short-header packet, then the 16-byte token.
pub const MIN_RESET_LEN: usize = 21;

/// The longest stateless reset we send: as long as a short packet to one of our
/// connection IDs, so that it looks like one.
pub const MAX_RESET_LEN: usize = 64;

/// The label that sets a key derived from a certificate apart from any other use of the
/// certificate's private key.
const LABEL: &[u8] = b"moqx-runtime stateless reset key v1";

/// The secret every stateless reset token of a server is derived from.
#[derive(Clone)]
pub struct StatelessResetKey {
    key: hmac::Key,
}

impl StatelessResetKey {
    /// A key derived from `secret` (any length; at least 16 random bytes to be unguessable).
    /// The same secret gives the same tokens, in this process or a later one.
    pub fn from_secret(secret: &[u8]) -> Self {
        let label = hmac::Key::new(hmac::HMAC_SHA256, LABEL);
        let derived = hmac::sign(&label, secret);
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        }
    }

    /// The key of a server presenting `certificate`: derived from its private key, so that
    /// a server restarted with the same certificate issues the same tokens, and two
    /// servers with their own certificates never share them.
    pub fn for_certificate(certificate: &Certificate) -> Self {
        Self::from_secret(certificate.key_pem().as_bytes())
    }

    /// A fresh random key: tokens that no later process can reproduce. Fails only if the
    /// system's random source does.
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)?;
        Ok(Self::from_secret(&secret))
    }

    /// The stateless reset token of connection ID `cid`, as quiche takes it (the 16 bytes
    /// it sends are the number's big-endian bytes).
    pub fn token(&self, cid: &[u8]) -> u128 {
        let tag = hmac::sign(&self.key, cid);
        let mut token = [0u8; 16];
        token.copy_from_slice(&tag.as_ref()[..16]);
        u128::from_be_bytes(token)
    }

    /// Writes into `out` the stateless reset answering a short-header packet of
    /// `trigger_len` bytes to connection ID `dcid`: a short-header first byte, random
    /// bytes, then the ID's token. It is shorter than the packet it answers, so two
    /// endpoints that both lost the connection cannot reset each other forever
    /// (§10.3.3). `false`, with `out` untouched, when the packet is too short to answer
    /// that way, or when there is no randomness.
    pub fn write_reset(&self, dcid: &[u8], trigger_len: usize, out: &mut Vec<u8>) -> bool {
        let len = trigger_len.saturating_sub(1).min(MAX_RESET_LEN);
        if len < MIN_RESET_LEN {
            return false;
        }
        let mut packet = [0u8; MAX_RESET_LEN];
        let unpredictable = len - 16;
        if getrandom::fill(&mut packet[..unpredictable]).is_err() {
            return false;
        }
        // Header form 0 (short), fixed bit 1, the rest random (§10.3).
        packet[0] = 0b0100_0000 | (packet[0] & 0b0011_1111);
        packet[unpredictable..len].copy_from_slice(&self.token(dcid).to_be_bytes());
        out.clear();
        out.extend_from_slice(&packet[..len]);
        true
    }
}

impl fmt::Debug for StatelessResetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A secret: never in a log.
        f.write_str("StatelessResetKey(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_depend_on_the_key_and_the_id_and_nothing_else() {
        let key = StatelessResetKey::from_secret(b"a secret of the relay");
        let again = StatelessResetKey::from_secret(b"a secret of the relay");
        let other = StatelessResetKey::from_secret(b"another relay's secret");
        assert_eq!(key.token(&[1; 16]), again.token(&[1; 16]), "a restart");
        assert_ne!(key.token(&[1; 16]), key.token(&[2; 16]), "another ID");
        assert_ne!(key.token(&[1; 16]), other.token(&[1; 16]), "another key");
        let random = StatelessResetKey::random().unwrap();
        assert_ne!(random.token(&[1; 16]), key.token(&[1; 16]));
        assert_eq!(format!("{key:?}"), "StatelessResetKey(..)");
    }

    #[test]
    fn a_reset_is_shorter_than_its_trigger_ends_in_the_token_and_looks_like_a_short_packet() {
        let key = StatelessResetKey::from_secret(b"k");
        let cid = [7u8; 16];
        let mut out = vec![0xff; 3];
        for trigger in [22, 43, 44, 100, 1350] {
            assert!(key.write_reset(&cid, trigger, &mut out), "{trigger}");
            assert!(out.len() < trigger && out.len() >= MIN_RESET_LEN);
            assert!(out.len() <= MAX_RESET_LEN);
            assert_eq!(out[0] & 0b1100_0000, 0b0100_0000, "short header, fixed bit");
            assert_eq!(out[out.len() - 16..], key.token(&cid).to_be_bytes());
        }
        for trigger in [0, 1, 20, 21] {
            out.clear();
            assert!(!key.write_reset(&cid, trigger, &mut out), "{trigger}");
            assert!(out.is_empty());
        }
    }

    #[test]
    fn a_certificate_gives_the_same_key_every_time_and_another_certificate_another() {
        let names = ["localhost".to_owned()];
        let one = Certificate::self_signed(&names).unwrap();
        let two = Certificate::self_signed(&names).unwrap();
        let cid = [3u8; 16];
        assert_eq!(
            StatelessResetKey::for_certificate(&one).token(&cid),
            StatelessResetKey::for_certificate(&one.clone()).token(&cid)
        );
        assert_ne!(
            StatelessResetKey::for_certificate(&one).token(&cid),
            StatelessResetKey::for_certificate(&two).token(&cid)
        );
    }
}
