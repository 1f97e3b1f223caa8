//! Admitting a new connection: the Initial of a connection nobody knows, let in (with a
//! connection ID of ours and a stateless reset token), asked to prove its address with a
//! Retry, or refused.

use std::net::SocketAddr;
use std::time::Instant;

use super::{Endpoint, EndpointError, MAX_DATAGRAM, Transmit};
use crate::admission::Gate;
use crate::quic::QuicConnection;

impl Endpoint {
    /// Decides on an Initial for no known connection: a new server connection (its
    /// index), a Retry asking the client to prove its address (`None`), or a refusal.
    pub(super) fn admit(
        &mut self,
        header: &quiche::Header<'_>,
        from: SocketAddr,
        local: SocketAddr,
        now: Instant,
    ) -> Result<Option<usize>, EndpointError> {
        if self.stopping {
            return Err(EndpointError::Stopping);
        }
        self.gate.check_room(from.ip())?;
        let token = header.token.as_deref().filter(|token| !token.is_empty());
        // A client echoing a Retry token proved its address; the connection ID it first
        // chose is in the token, and the one it uses now is the one our Retry gave it.
        let validated = match (token, self.gate.retry_tokens()) {
            (Some(token), Some(tokens)) => match tokens.validate(from, &header.dcid, token, now) {
                Some(original) => Some(original),
                None => {
                    tracing::debug!(%from, "dropping an Initial with an invalid token");
                    return Ok(None);
                }
            },
            _ => None,
        };
        if validated.is_none()
            && self.gate.wants_retry()
            && let Some(tokens) = self.gate.retry_tokens()
        {
            let scid = self.cids.generate()?;
            let token = tokens.mint(from, &header.dcid, scid.as_bytes(), now);
            let mut contents = self.spare_contents.take();
            contents.resize(MAX_DATAGRAM, 0);
            let len = quiche::retry(
                &header.scid,
                &header.dcid,
                &quiche::ConnectionId::from_ref(scid.as_bytes()),
                &token,
                header.version,
                &mut contents,
            )?;
            contents.truncate(len);
            tracing::debug!(%from, half_open = self.gate.half_open(), "asking for address validation (Retry)");
            self.stateless.push(Transmit {
                destination: from,
                source: self.source(local),
                contents,
                segment_size: len,
            });
            return Ok(None);
        }
        tracing::debug!(%from, validated = validated.is_some(), "a new connection");
        let (scid, cids) = match &validated {
            // Our Retry chose the connection ID the client now uses: it stays ours.
            Some(_) => (header.dcid.to_vec(), vec![header.dcid.to_vec()]),
            None => {
                let scid = self.cids.generate()?.as_bytes().to_vec();
                // The client keeps using its own DCID until it hears ours: route both.
                (scid.clone(), vec![scid, header.dcid.to_vec()])
            }
        };
        let original = validated.as_deref().map(quiche::ConnectionId::from_ref);
        // The token of our first connection ID goes in the transport parameters, the one
        // a client checks a stateless reset against. Not after a Retry: quiche (0.30)
        // encodes a server's transport parameters into 128 bytes, and the Retry's
        // connection ID (18 bytes) with the token (18) and a long original ID overflow
        // it: the handshake would fail (BufferTooShort). A connection let in under Retry
        // pressure goes without resets.
        let token = match validated {
            None => self.reset_key.as_ref().map(|key| key.token(&scid)),
            Some(_) => None,
        };
        if let Some(config) = self
            .certificates
            .as_mut()
            .and_then(crate::certificates::Watched::refreshed)
        {
            self.config = config;
        }
        self.config.set_stateless_reset_token(token);
        self.gate.begin_handshake()?;
        let mut conn = match quiche::accept(
            &quiche::ConnectionId::from_ref(&scid),
            original.as_ref(),
            local,
            from,
            &mut self.config,
        ) {
            Ok(conn) => conn,
            Err(error) => {
                self.gate.ended(from.ip(), false);
                return Err(error.into());
            }
        };
        if self.trace.is_enabled() {
            self.trace.attach(&mut conn, "server");
        }
        self.half_open += 1;
        let index = self.insert(QuicConnection::new(conn), cids, false, now);
        if let Some(entry) = self.connections[index].as_mut() {
            entry.client = Some(from.ip());
        }
        Ok(Some(index))
    }
}

impl Endpoint {
    /// Admits server connections through `gate`: its policy (`max_connections`
    /// included) and its counts, which the server's other endpoints may share.
    pub fn set_gate(&mut self, gate: Gate) {
        self.gate = gate;
    }

    /// Traces each new server connection as `trace` says (qlog, TLS keys). A key log
    /// needs the endpoint's QUIC configuration made with keys logged
    /// (`quiche::Config::log_keys`).
    pub fn set_trace(&mut self, trace: crate::quic_trace::QuicTrace) {
        self.trace = trace;
    }

    /// New handshakes follow `certificates`: when it is replaced, the next handshake
    /// first rebuilds this endpoint's QUIC configuration with `rebuild` (connections up
    /// keep theirs). The configuration it has now is taken to hold the current one.
    pub fn follow_certificates(
        &mut self,
        certificates: crate::certificates::Certificates,
        rebuild: impl Fn(
            &crate::tls::Certificate,
        ) -> Result<quiche::Config, crate::quiche_config::ConfigError>
        + Send
        + 'static,
    ) {
        self.certificates = Some(crate::certificates::Watched {
            generation: certificates.generation(),
            certificates,
            rebuild: Box::new(rebuild),
        });
    }
}
