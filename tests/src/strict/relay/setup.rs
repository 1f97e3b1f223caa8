//! The start of a client's session: the type of each stream it opens, its SETUP (on -05),
//! and what the relay opens once the session begins.

use super::super::wire::{self, AnnounceRequest, Setup, Subscribe, Track, WireError};
use super::{Link, Role, SETUP_PATH, StrictRelay, code, refuse, write_type};

impl StrictRelay {
    /// A client stream's first varint: its type.
    pub(super) fn read_stream_type(&mut self, index: usize, id: u64) {
        let Some(client) = self.client_mut(index) else {
            return;
        };
        let setup_received = client.setup_received;
        let lite = client.lite;
        let Some(stream) = client.streams.get_mut(&id) else {
            return;
        };
        let mut cursor = &stream.rx[..];
        let Ok(kind) = wire::read_varint(&mut cursor) else {
            return; // not there yet (or the stream ended empty)
        };
        let taken = stream.rx.len() - cursor.len();
        stream.rx.drain(..taken);
        let uni = id & 2 == 2;
        let role = match (uni, kind) {
            (true, 1) if !lite.is_05() => {
                // A deployed peer stops it (UnexpectedStream); sending it is a client bug.
                let _ = client.conn.stream_shutdown(
                    id,
                    quiche::Shutdown::Read,
                    code::UNEXPECTED_STREAM,
                );
                self.violation(index, format!("a Setup stream on {lite:?}, which has none"));
                Role::Discard
            }
            (true, 1) => Role::SetupIn,
            // Before SETUP, a deployed relay discards every other uni stream.
            (true, _) if !setup_received => {
                let _ = client.conn.stream_shutdown(id, quiche::Shutdown::Read, 0);
                Role::Discard
            }
            (true, 0) => Role::GroupIn {
                header: None,
                to: None,
            },
            (true, other) => {
                let _ = client.conn.stream_shutdown(id, quiche::Shutdown::Read, 0);
                self.violation(index, format!("a uni stream of unknown type {other}"));
                return;
            }
            // Bidi streams wait for SETUP.
            (false, _) if !setup_received => {
                let mut kept = Vec::new();
                write_type(&mut kept, kind);
                kept.extend_from_slice(&stream.rx);
                stream.rx = kept;
                return;
            }
            (false, 1) => Role::AnnounceAsked,
            (false, 3) | (false, 6) if !lite.is_05() => {
                refuse(&mut client.conn, id, code::UNEXPECTED_STREAM);
                let what = format!(
                    "a {} stream on {lite:?}, which has none",
                    if kind == 3 { "Fetch" } else { "Track" }
                );
                self.violation(index, what);
                Role::Discard
            }
            (false, 2) | (false, 6) => {
                let link = self.next_link;
                self.next_link += 1;
                self.links.insert(
                    link,
                    Link {
                        down: (index, id),
                        publisher: usize::MAX,
                        track: Track {
                            broadcast: String::new(),
                            track: String::new(),
                        },
                        subscribe: (kind == 2).then(|| {
                            (
                                Subscribe {
                                    id: 0,
                                    broadcast: String::new(),
                                    track: String::new(),
                                    priority: 0,
                                    ordered: 0,
                                    max_latency: 0,
                                    start: 0,
                                    end: 0,
                                },
                                0,
                            )
                        }),
                        answered: false,
                        highest_group: None,
                        up_track: None,
                        up_subscribe: None,
                    },
                );
                Role::RequestIn { link }
            }
            (false, 3) | (false, 4) => {
                // FETCH and PROBE: optional for a relay; refused alone.
                refuse(&mut client.conn, id, code::UNSUPPORTED);
                Role::Discard
            }
            (false, 5) => Role::Discard, // GOAWAY: only logged by a deployed peer
            (false, other) => {
                refuse(&mut client.conn, id, code::CANCEL);
                self.violation(index, format!("a bidi stream of unknown type {other}"));
                return;
            }
        };
        if let Some(stream) = self.stream_mut(index, id) {
            stream.role = role;
        }
        self.handle_stream(index, id);
    }

    /// The client's SETUP: one message, then FIN.
    pub(super) fn read_setup(&mut self, index: usize, id: u64) {
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        let parsed = match wire::take_message(&stream.rx) {
            Ok(Some((body, taken))) => {
                let setup = wire::decode_body(body, "SETUP", Setup::decode);
                stream.rx.drain(..taken);
                Some(setup)
            }
            Ok(None) if stream.rx_fin => Some(Err(WireError::Invalid(
                "the SETUP stream ends before its message".into(),
            ))),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        };
        let extra = !stream.rx.is_empty();
        stream.role = Role::Discard;
        let setup = match parsed {
            None => {
                stream.role = Role::SetupIn;
                return;
            }
            Some(Ok(setup)) => setup,
            Some(Err(error)) => {
                self.violation(index, format!("a bad SETUP: {error}"));
                self.close(index, code::DECODE, "bad SETUP");
                return;
            }
        };
        if extra {
            self.violation(index, "bytes after the SETUP message".into());
        }
        let path = setup
            .parameter(SETUP_PATH)
            .map(|raw| String::from_utf8_lossy(raw).into_owned())
            .unwrap_or_default();
        let path = path.split('?').next().unwrap_or_default();
        let root = match wire::normalize(path) {
            Ok(root) => root,
            Err(error) => {
                self.violation(index, format!("a bad SETUP path: {error}"));
                return;
            }
        };
        if self
            .client(index)
            .is_some_and(|client| client.setup_received)
        {
            return; // a second SETUP overwrites nothing we use
        }
        self.begin(index, root);
    }

    /// The session of client `index` begins (its SETUP arrived on -05; at once before):
    /// the relay's SETUP (on -05) and its announce stream go out, and the bidi streams
    /// that waited are read.
    pub(super) fn begin(&mut self, index: usize, root: String) {
        let origin_id = self.origin_id;
        let Some(client) = self.client_mut(index) else {
            return;
        };
        client.setup_received = true;
        client.root = root;
        let lite = client.lite;
        if lite.is_05() {
            // Our SETUP: no parameters.
            client.open(true, Role::WriteOnly, vec![0x01, 0x01, 0x00], true);
        } else {
            // No ANNOUNCE_OK to wait for before -05: announcements start at once.
            client.hop_id = Some(0);
        }
        // Our announce stream to the client, as a deployed relay opens it to everyone.
        let mut tx = vec![0x01];
        tx.extend(
            AnnounceRequest {
                prefix: String::new(),
                exclude_hop: origin_id,
            }
            .encode(lite),
        );
        client.announce = Some(client.open(false, Role::AnnounceOut, tx, false));
        self.note(|report| report.sessions += 1);
        if !lite.is_05() {
            self.note(|report| report.announce_answered += 1);
        }
        if self.settings.verbose {
            let client = self.client(index).map(|c| (c.name.clone(), c.root.clone()));
            eprintln!("strict-relay: {lite:?} session of {client:?}");
        }
        // Bidi streams that waited for SETUP.
        let waiting: Vec<u64> = self
            .client(index)
            .map(|client| {
                client
                    .streams
                    .iter()
                    .filter(|(id, stream)| *id & 2 == 0 && stream.role == Role::Unknown)
                    .map(|(id, _)| *id)
                    .collect()
            })
            .unwrap_or_default();
        for id in waiting {
            self.handle_stream(index, id);
        }
    }
}
