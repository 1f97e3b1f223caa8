//! The strict relay's announcements: its own announce stream to every client (whose
//! failure ends the session, as in a deployed relay), the broadcasts clients announce on
//! it, and the clients' own announce streams, answered with the live set and every change.

use std::collections::HashSet;

use super::super::wire::{self, Announce, AnnounceOk, AnnounceRequest, Lite};
use super::{Published, Role, StrictRelay, code};

impl StrictRelay {
    /// The relay's announce stream to a client: its ANNOUNCE_OK (on -05), then ANNOUNCEs.
    /// Any failure of it closes the session with code 1, as a deployed relay does.
    pub(super) fn read_announces(&mut self, index: usize, id: u64) {
        loop {
            let Some(stream) = self.stream_mut(index, id) else {
                return;
            };
            if let Some(code) = stream.rx_reset {
                stream.rx_reset = None;
                return self.announce_failed(index, format!("reset with code {code}"));
            }
            let taken = match wire::take_message(&stream.rx) {
                Ok(Some((body, taken))) => Some((body.to_vec(), taken)),
                Ok(None) => None,
                Err(error) => return self.announce_failed(index, error.to_string()),
            };
            let Some((body, taken)) = taken else {
                if stream.rx_fin && !stream.rx.is_empty() {
                    return self.announce_failed(index, "a message cut off by FIN".into());
                }
                if stream.rx_fin {
                    // A FIN cleanly ends the stream: its broadcasts end with it.
                    stream.role = Role::Discard;
                    self.unannounce_all(index);
                }
                return;
            };
            stream.rx.drain(..taken);
            let Some(client) = self.client_mut(index) else {
                return;
            };
            if client.hop_id.is_none() {
                match wire::decode_body(&body, "ANNOUNCE_OK", AnnounceOk::decode) {
                    Ok(ok) => {
                        client.hop_id = Some(ok.hop_id);
                        client.initial_left = ok.active_count;
                        self.note(|report| report.announce_answered += 1);
                    }
                    Err(error) => return self.announce_failed(index, error.to_string()),
                }
                continue;
            }
            let lite = client.lite;
            let announce = match wire::decode_body(&body, "ANNOUNCE", |b| Announce::decode(b, lite))
            {
                Ok(announce) => announce,
                Err(error) => return self.announce_failed(index, error.to_string()),
            };
            if client.initial_left > 0 {
                client.initial_left -= 1;
                if !announce.active {
                    let what = "an ended ANNOUNCE within ANNOUNCE_OK's initial set".into();
                    self.violation(index, what);
                }
            }
            self.take_announce(index, announce);
        }
    }

    pub(super) fn announce_failed(&mut self, index: usize, why: String) {
        self.violation(index, format!("the relay's announce stream failed: {why}"));
        self.close(index, code::REQUIRED_EXTENSION, "announce stream failed");
    }

    /// STOP_SENDING on the relay's announce stream is as fatal as a reset.
    pub(super) fn watch_announce_stream(&mut self, index: usize) {
        let Some(client) = self.client_mut(index) else {
            return;
        };
        let Some(id) = client.announce else {
            return;
        };
        if let Err(quiche::Error::StreamStopped(code)) = client.conn.stream_capacity(id) {
            client.announce = None;
            self.announce_failed(index, format!("stopped with code {code}"));
        }
    }

    /// A client's ANNOUNCE on the relay's announce stream: record or forget the broadcast
    /// and tell every listener.
    pub(super) fn take_announce(&mut self, index: usize, announce: Announce) {
        let origin_id = self.origin_id;
        let Some(client) = self.client_mut(index) else {
            return;
        };
        let suffix = match wire::normalize(&announce.suffix) {
            Ok(suffix) => suffix,
            Err(error) => return self.violation(index, format!("an ANNOUNCE path: {error}")),
        };
        let path = wire::join(&client.root, &suffix);
        if announce.active && !client.lite.is_05() && client.announced.contains(&path) {
            // No restart before -05: a deployed receiver closes the session on it.
            let what = format!("a second active ANNOUNCE for {path:?} on {:?}", client.lite);
            self.violation(index, what);
            return self.close(index, code::DUPLICATE, "duplicate announce");
        }
        if announce.active {
            // -05: the chain plus ANNOUNCE_OK's id; before, the sender appended itself.
            let mut hops = announce.hops;
            if client.lite.is_05() {
                hops.extend(client.hop_id);
            }
            if hops.contains(&origin_id) {
                return; // a loop through this relay
            }
            client.announced.insert(path.clone());
            self.broadcasts.insert(
                path.clone(),
                Published {
                    client: index,
                    hops: hops.clone(),
                },
            );
            self.notify_listeners(&path, Some(&hops));
        } else {
            if !client.announced.remove(&path) {
                let what = format!("an ended ANNOUNCE for {path:?}, never announced active");
                return self.violation(index, what);
            }
            self.withdraw(index, &path);
        }
    }

    /// Ends broadcast `path` if client `index` is the one publishing it.
    fn withdraw(&mut self, index: usize, path: &str) {
        if self.broadcasts.get(path).is_some_and(|p| p.client == index) {
            self.broadcasts.remove(path);
            self.notify_listeners(path, None);
        }
    }

    pub(super) fn unannounce_all(&mut self, index: usize) {
        let Some(client) = self.client_mut(index) else {
            return;
        };
        let paths: Vec<String> = client.announced.drain().collect();
        for path in paths {
            self.withdraw(index, &path);
        }
    }

    /// Tells every client announce stream under which `path` lies that it became active
    /// (`hops`) or ended (`None`), each in its client's version: before -05 the relay
    /// appends its own id, and a path already active there is not announced again (a
    /// deployed -03/-04 publisher does not re-announce a route change).
    pub(super) fn notify_listeners(&mut self, path: &str, hops: Option<&[u64]>) {
        let origin_id = self.origin_id;
        for client in self.clients.iter_mut().flatten() {
            let lite = client.lite;
            for stream in client.streams.values_mut() {
                let Role::AnnounceIn {
                    prefix,
                    exclude_hop,
                    active,
                } = &mut stream.role
                else {
                    continue;
                };
                let Some(suffix) = wire::strip(path, prefix) else {
                    continue;
                };
                let message = match hops {
                    Some(hops) if !(*exclude_hop != 0 && hops.contains(exclude_hop)) => {
                        if !active.insert(path.to_owned()) && !lite.is_05() {
                            continue;
                        }
                        Announce {
                            active: true,
                            suffix: suffix.to_owned(),
                            hops: sent_hops(hops, lite, origin_id),
                        }
                    }
                    _ => {
                        if !active.remove(path) {
                            continue;
                        }
                        Announce {
                            active: false,
                            suffix: suffix.to_owned(),
                            hops: Vec::new(),
                        }
                    }
                };
                stream.tx.extend(message.encode(lite));
            }
        }
    }

    /// The client's own ANNOUNCE_REQUEST: ANNOUNCE_OK, the live set, and later changes;
    /// then only its FIN (or a reset) may come.
    pub(super) fn read_announce_in(&mut self, index: usize, id: u64) {
        let origin_id = self.origin_id;
        let (root, lite) = self
            .client(index)
            .map(|c| (c.root.clone(), c.lite))
            .unwrap_or((String::new(), Lite::V05));
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        if stream.rx_reset.is_some() {
            stream.role = Role::Discard;
            return;
        }
        if matches!(stream.role, Role::AnnounceIn { .. }) {
            if !stream.rx.is_empty() {
                stream.rx.clear();
                return self.violation(index, "bytes after ANNOUNCE_REQUEST".into());
            }
            // The subscriber ends the stream with FIN: so does the relay.
            stream.tx_fin |= stream.rx_fin;
            return;
        }
        let request = match wire::take_message(&stream.rx) {
            Ok(Some((body, taken))) => {
                let request = wire::decode_body(body, "ANNOUNCE_REQUEST", |b| {
                    AnnounceRequest::decode(b, lite)
                });
                stream.rx.drain(..taken);
                request
            }
            Ok(None) => return,
            Err(error) => Err(error),
        };
        let request = match request {
            Ok(request) => request,
            Err(error) => {
                let what = format!("a bad ANNOUNCE_REQUEST: {error}");
                return self.violation(index, what);
            }
        };
        let relative = match wire::normalize(&request.prefix) {
            Ok(prefix) => prefix,
            Err(error) => return self.violation(index, format!("an announce prefix: {error}")),
        };
        let full = wire::join(&root, &relative);
        let mut active = HashSet::new();
        let mut announces = Vec::new();
        for (path, published) in &self.broadcasts {
            let Some(suffix) = wire::strip(path, &full) else {
                continue;
            };
            if request.exclude_hop != 0 && published.hops.contains(&request.exclude_hop) {
                continue;
            }
            active.insert(path.clone());
            announces.extend(
                Announce {
                    active: true,
                    suffix: suffix.to_owned(),
                    hops: sent_hops(&published.hops, lite, origin_id),
                }
                .encode(lite),
            );
        }
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        if lite.is_05() {
            stream.tx.extend(
                AnnounceOk {
                    hop_id: origin_id,
                    active_count: active.len() as u64,
                }
                .encode(),
            );
        }
        stream.tx.extend(announces);
        stream.role = Role::AnnounceIn {
            prefix: full,
            exclude_hop: request.exclude_hop,
            active,
        };
        // A FIN or more bytes right behind the request.
        self.read_announce_in(index, id);
    }
}

/// The hops the relay writes for a broadcast reached through `hops`: on -05 as they are
/// (its own id is in ANNOUNCE_OK), before it with its own id appended.
fn sent_hops(hops: &[u64], lite: Lite, origin_id: u64) -> Vec<u64> {
    let mut sent = hops.to_vec();
    if !lite.is_05() {
        sent.push(origin_id);
    }
    sent
}
