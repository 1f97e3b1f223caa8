//! The strict relay's forwarding: a client's TRACK and SUBSCRIBE go to the broadcast's
//! publisher (TRACK first on -05, then SUBSCRIBE under an id of the relay's, as a deployed
//! subscriber does), the publisher's responses and groups come back, frame by frame and
//! translated where the two clients' versions differ, and a reset or a cancel on either
//! side ends the other.

use super::super::wire::{self, GroupHeader, Lite, Response, Subscribe, Track};
use super::{Role, StrictRelay, code, refuse};

/// TRACK_INFO with the defaults a deployed relay gives a track whose publisher speaks -03
/// or -04 (priority 0, unordered, 5 s, timescale 1000).
const DEFAULT_TRACK_INFO: [u8; 7] = [0x06, 0x00, 0x00, 0x53, 0x88, 0x43, 0xe8];

impl StrictRelay {
    /// The client's TRACK or SUBSCRIBE (and, for a SUBSCRIBE, its updates and cancel).
    pub(super) fn read_request_in(&mut self, index: usize, id: u64, link: u64) {
        let Some(entry) = self.links.get(&link) else {
            return;
        };
        let started = entry.publisher != usize::MAX;
        let is_subscribe = entry.subscribe.is_some();
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        if let Some(code) = stream.rx_reset.take() {
            return self.end_link(link, Some(code));
        }
        if started {
            // Only SUBSCRIBE_UPDATEs and the cancel (FIN) follow a SUBSCRIBE.
            loop {
                let Some(stream) = self.stream_mut(index, id) else {
                    return;
                };
                match wire::take_message(&stream.rx) {
                    Ok(Some((body, taken))) if is_subscribe => {
                        if let Err(error) = wire::decode_body(
                            body,
                            "SUBSCRIBE_UPDATE",
                            wire::check_subscribe_update,
                        ) {
                            stream.rx.clear();
                            return self.violation(index, error.to_string());
                        }
                        let update: Vec<u8> = stream.rx.drain(..taken).collect();
                        self.send_up(link, &update, false);
                    }
                    Ok(Some(_)) => {
                        stream.rx.clear();
                        return self.violation(index, "bytes after TRACK".into());
                    }
                    Ok(None) => break,
                    Err(error) => {
                        stream.rx.clear();
                        return self.violation(index, error.to_string());
                    }
                }
            }
            if self
                .stream(index, id)
                .is_some_and(|s| s.rx_fin && s.rx.is_empty())
            {
                if let Some(stream) = self.stream_mut(index, id) {
                    stream.role = Role::Discard;
                }
                // The subscriber cancels (or is done with TRACK): tell the publisher.
                self.send_up(link, &[], true);
            }
            return;
        }
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        let (body, taken) = match wire::take_message(&stream.rx) {
            Ok(Some((body, taken))) => (body.to_vec(), taken),
            Ok(None) => return,
            Err(error) => return self.violation(index, error.to_string()),
        };
        stream.rx.drain(..taken);
        let (broadcast, track, subscribe) = if is_subscribe {
            match wire::decode_body(&body, "SUBSCRIBE", Subscribe::decode) {
                Ok(request) => (
                    request.broadcast.clone(),
                    request.track.clone(),
                    Some(request),
                ),
                Err(error) => return self.violation(index, error.to_string()),
            }
        } else {
            match wire::decode_body(&body, "TRACK", Track::decode) {
                Ok(request) => (request.broadcast, request.track, None),
                Err(error) => return self.violation(index, error.to_string()),
            }
        };
        let root = self
            .client(index)
            .map(|c| c.root.clone())
            .unwrap_or_default();
        let Ok(relative) = wire::normalize(&broadcast) else {
            return self.violation(index, format!("a bad broadcast path {broadcast:?}"));
        };
        let full = wire::join(&root, &relative);
        let Some(publisher) = self.broadcasts.get(&full).map(|p| p.client) else {
            if let Some(client) = self.client_mut(index) {
                refuse(&mut client.conn, id, code::NOT_FOUND);
            }
            self.links.remove(&link);
            if let Some(stream) = self.stream_mut(index, id) {
                stream.role = Role::Discard;
            }
            return;
        };
        let publisher_root = self
            .client(publisher)
            .map(|c| c.root.clone())
            .unwrap_or_default();
        let up_broadcast = wire::strip(&full, &publisher_root)
            .unwrap_or(&full)
            .to_owned();
        let Some(up) = self.client_mut(publisher) else {
            return;
        };
        let up_id = up.next_subscribe_id;
        up.next_subscribe_id += 1;
        let request = Track {
            broadcast: up_broadcast.clone(),
            track: track.clone(),
        };
        if !up.lite.is_05() {
            // Before -05 there is no TRACK: a SUBSCRIBE goes up at once, and a lone
            // TRACK is answered here with the defaults a deployed relay gives the track.
            let Some(subscribe) = subscribe else {
                self.links.remove(&link);
                if let Some(stream) = self.stream_mut(index, id) {
                    stream.tx.extend(DEFAULT_TRACK_INFO);
                    stream.tx_fin = true;
                    stream.role = Role::Discard;
                }
                return;
            };
            let up_request = Subscribe {
                id: up_id,
                broadcast: up_broadcast,
                ..subscribe.clone()
            };
            let mut tx = vec![0x02];
            tx.extend(up_request.encode());
            let stream_id = up.open(false, Role::SubscribeOut { link }, tx, false);
            if let Some(entry) = self.links.get_mut(&link) {
                entry.publisher = publisher;
                entry.track = request;
                entry.up_subscribe = Some(stream_id);
                entry.subscribe = Some((subscribe, up_id));
            }
            self.by_upstream_id.insert((publisher, up_id), link);
            return self.read_request_in(index, id, link);
        }
        // As a deployed subscriber does on lite-05: TRACK first, SUBSCRIBE once it is
        // answered.
        let mut tx = vec![0x06];
        tx.extend(request.encode());
        let track_stream = up.open(false, Role::TrackOut { link }, tx, false);
        if let Some(entry) = self.links.get_mut(&link) {
            entry.publisher = publisher;
            entry.track = request;
            entry.up_track = Some(track_stream);
            entry.subscribe = subscribe.map(|request| (request, up_id));
        }
        if is_subscribe {
            self.by_upstream_id.insert((publisher, up_id), link);
        }
        // A FIN already there (TRACK's sole message) is seen on the next read.
        self.read_request_in(index, id, link);
    }

    /// The publisher's TRACK_INFO: for a lone TRACK, forwarded to the subscriber; for a
    /// SUBSCRIBE, the cue to send it.
    pub(super) fn read_track_info(&mut self, index: usize, id: u64, link: u64) {
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        if let Some(code) = stream.rx_reset.take() {
            stream.role = Role::Discard;
            return self.end_link(link, Some(code));
        }
        let (body, taken) = match wire::take_message(&stream.rx) {
            Ok(Some((body, taken))) => (body.to_vec(), taken),
            Ok(None) => {
                if stream.rx_fin {
                    let what = "the TRACK stream ended without TRACK_INFO".into();
                    return self.violation(index, what);
                }
                return;
            }
            Err(error) => return self.violation(index, error.to_string()),
        };
        let info: Vec<u8> = stream.rx.drain(..taken).collect();
        // The publisher FINs after TRACK_INFO; the relay FINs its side on reading it.
        stream.tx_fin = true;
        stream.role = Role::Discard;
        if !stream.rx.is_empty() {
            return self.violation(index, "bytes after TRACK_INFO".into());
        }
        if let Err(error) = wire::decode_body(&body, "TRACK_INFO", wire::check_track_info) {
            return self.violation(index, error.to_string());
        }
        let Some(entry) = self.links.get(&link) else {
            return;
        };
        let down = entry.down;
        match &entry.subscribe {
            None => {
                // A lone TRACK: TRACK_INFO is the sole reply, then FIN.
                if let Some(stream) = self.stream_mut(down.0, down.1) {
                    stream.tx.extend(info);
                    stream.tx_fin = true;
                }
                self.links.remove(&link);
            }
            Some((request, up_id)) => {
                let up = Subscribe {
                    id: *up_id,
                    broadcast: entry.track.broadcast.clone(),
                    ..request.clone()
                };
                let publisher = entry.publisher;
                let Some(client) = self.client_mut(publisher) else {
                    return;
                };
                let mut tx = vec![0x02];
                tx.extend(up.encode());
                let stream_id = client.open(false, Role::SubscribeOut { link }, tx, false);
                if let Some(entry) = self.links.get_mut(&link) {
                    entry.up_subscribe = Some(stream_id);
                }
                // A -03/-04 subscriber waits for SUBSCRIBE_OK: the track is there.
                self.answer_down(down, Response::Ok);
            }
        }
    }

    /// SUBSCRIBE_START / END / DROP (or, before -05, SUBSCRIBE_OK / DROP) from the
    /// publisher, forwarded as the subscriber's version says them; its FIN ends the
    /// subscription downstream too.
    pub(super) fn read_subscribe_responses(&mut self, index: usize, id: u64, link: u64) {
        let up_lite = self.client(index).map_or(Lite::V05, |c| c.lite);
        let Some((down, mut answered)) = self.links.get(&link).map(|l| (l.down, l.answered)) else {
            return;
        };
        let down_lite = self.client(down.0).map_or(Lite::V05, |c| c.lite);
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        if let Some(code) = stream.rx_reset.take() {
            stream.role = Role::Discard;
            return self.end_link(link, Some(code));
        }
        let mut forward = Vec::new();
        let mut violation = None;
        loop {
            match wire::take_subscribe_response(&stream.rx, up_lite) {
                Ok(Some((taken, response))) => {
                    let raw: Vec<u8> = stream.rx.drain(..taken).collect();
                    if !up_lite.is_05() && !answered && response != Response::Ok {
                        // A deployed -03/-04 subscriber fails the subscription
                        // (ProtocolViolation) on anything but SUBSCRIBE_OK first.
                        violation = Some(format!("{response:?} before SUBSCRIBE_OK"));
                    }
                    answered = true;
                    match up_lite.is_05() == down_lite.is_05() {
                        true => forward.extend(raw),
                        false => forward.extend(response.encode(down_lite).unwrap_or_default()),
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    stream.rx.clear();
                    return self.violation(index, format!("a subscribe response: {error}"));
                }
            }
        }
        if let Some(entry) = self.links.get_mut(&link) {
            entry.answered = answered;
        }
        if let Some(what) = violation {
            self.violation(index, what);
        }
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        let fin = stream.rx_fin;
        if fin && !stream.rx.is_empty() {
            return self.violation(index, "a subscribe response cut off by FIN".into());
        }
        if fin {
            stream.role = Role::Discard;
            if !up_lite.is_05() && down_lite.is_05() {
                // The -03/-04 publisher's FIN ends the track: a deployed relay tells a -05
                // subscriber with SUBSCRIBE_END, one past the highest group it forwarded.
                let highest = self.links.get(&link).and_then(|l| l.highest_group);
                forward.extend(wire::start_or_end(true, highest.map_or(0, |g| g + 1)));
            }
        }
        if let Some(stream) = self.stream_mut(down.0, down.1) {
            stream.tx.extend(forward);
            stream.tx_fin |= fin;
        }
        if fin {
            self.forget_link(link);
        }
    }

    /// Writes `response` on the subscriber's SUBSCRIBE stream `down` if its version has
    /// such a message (SUBSCRIBE_OK: -03 and -04 only).
    fn answer_down(&mut self, down: (usize, u64), response: Response) {
        let lite = self.client(down.0).map_or(Lite::V05, |c| c.lite);
        let Some(bytes) = response.encode(lite) else {
            return;
        };
        if let Some(stream) = self.stream_mut(down.0, down.1) {
            stream.tx.extend(bytes);
        }
    }

    /// A publisher's group stream: its header, then frames as they come, forwarded.
    pub(super) fn forward_group(&mut self, index: usize, id: u64) {
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        let Role::GroupIn { mut header, to } = stream.role.clone() else {
            return;
        };
        if header.is_none() {
            let taken = match wire::take_message(&stream.rx) {
                Ok(Some((body, taken))) => {
                    (wire::decode_body(body, "GROUP", GroupHeader::decode), taken)
                }
                Ok(None) => return,
                Err(error) => return self.violation(index, format!("GROUP: {error}")),
            };
            match taken {
                (Ok(parsed), taken) => {
                    stream.rx.drain(..taken);
                    header = Some(parsed);
                    stream.role = Role::GroupIn { header, to };
                }
                (Err(error), _) => return self.violation(index, error.to_string()),
            }
        }
        let to = match (to, header) {
            (Some(to), _) => to,
            (None, Some(header)) => match self.open_group_out(index, id, header) {
                Some(to) => to,
                None => return, // discarded, or waiting for stream credit
            },
            (None, None) => return,
        };
        let from = self.client(index).map_or(Lite::V05, |c| c.lite);
        let to_lite = self.client(to.0).map_or(Lite::V05, |c| c.lite);
        let Some(stream) = self.stream_mut(index, id) else {
            return;
        };
        if let Some(code) = stream.rx_reset.take() {
            // The publisher abandoned the group: so does the relay, with the same code.
            stream.role = Role::Discard;
            if let Some(client) = self.client_mut(to.0) {
                let _ = client
                    .conn
                    .stream_shutdown(to.1, quiche::Shutdown::Write, code);
                if let Some(out) = client.streams.get_mut(&to.1) {
                    out.tx.clear();
                    out.tx_done = true;
                }
            }
            return;
        }
        let mut frames = Vec::new();
        loop {
            match wire::take_frame(&stream.rx, from, to_lite) {
                Ok(Some((taken, frame))) => {
                    stream.rx.drain(..taken);
                    frames.extend(frame);
                }
                Ok(None) => break,
                Err(error) => return self.violation(index, format!("a FRAME: {error}")),
            }
        }
        let fin = stream.rx_fin;
        if fin && !stream.rx.is_empty() {
            return self.violation(index, "a group cut off mid-frame by FIN".into());
        }
        if fin {
            stream.role = Role::Discard;
        }
        if let Some(out) = self.stream_mut(to.0, to.1) {
            out.tx.extend(frames);
            out.tx_fin |= fin;
        }
    }

    /// Opens the stream a publisher's group goes out on, toward its subscriber: `None` if
    /// no subscription has the group's id (the group is refused) or the subscriber gives
    /// no stream credit yet (the group waits).
    pub(super) fn open_group_out(
        &mut self,
        index: usize,
        id: u64,
        header: GroupHeader,
    ) -> Option<(usize, u64)> {
        let link_id = self
            .by_upstream_id
            .get(&(index, header.subscribe_id))
            .copied();
        let route = link_id
            .and_then(|link| self.links.get(&link))
            .and_then(|link| Some((link.down, link.subscribe.as_ref()?.0.id)));
        let Some(((subscriber, down_stream), down_id)) = route else {
            // spec: a GROUP with an unknown id is STOP_SENDING'd with code 0.
            let client = self.client_mut(index)?;
            let _ = client.conn.stream_shutdown(id, quiche::Shutdown::Read, 0);
            if let Some(stream) = client.streams.get_mut(&id) {
                stream.role = Role::Discard;
            }
            return None;
        };
        let up_lite = self.client(index).map_or(Lite::V05, |c| c.lite);
        let client = self.client_mut(subscriber)?;
        if client.conn.peer_streams_left_uni() == 0 {
            client.waiting_groups.push((index, id));
            return None;
        }
        if !up_lite.is_05() && client.lite.is_05() {
            // A -05 subscriber of a -03/-04 publisher gets SUBSCRIBE_START with the first
            // group, and later the END, as a deployed relay makes them up.
            let first = self
                .links
                .get(&link_id?)
                .is_some_and(|l| l.highest_group.is_none());
            if first {
                let start = wire::start_or_end(false, header.sequence);
                if let Some(stream) = self.stream_mut(subscriber, down_stream) {
                    stream.tx.extend(start);
                }
            }
        }
        if let Some(link) = link_id.and_then(|link| self.links.get_mut(&link)) {
            link.highest_group = Some(
                link.highest_group
                    .map_or(header.sequence, |g| g.max(header.sequence)),
            );
        }
        let client = self.client_mut(subscriber)?;
        let group = GroupHeader {
            subscribe_id: down_id,
            sequence: header.sequence,
        };
        let out = client.open(
            true,
            Role::GroupOut { from: (index, id) },
            group.encode(),
            false,
        );
        let to = (subscriber, out);
        if let Some(stream) = self.stream_mut(index, id) {
            stream.role = Role::GroupIn {
                header: Some(header),
                to: Some(to),
            };
        }
        Some(to)
    }

    pub(super) fn retry_waiting_groups(&mut self, index: usize) {
        let Some(client) = self.client_mut(index) else {
            return;
        };
        if client.waiting_groups.is_empty() || client.conn.peer_streams_left_uni() == 0 {
            return;
        }
        let waiting = std::mem::take(&mut client.waiting_groups);
        for (publisher, id) in waiting {
            self.forward_group(publisher, id);
        }
    }

    /// Queues `bytes` (and the FIN if `fin`) on the link's SUBSCRIBE stream toward the
    /// publisher (or, before it exists, ends the TRACK request).
    pub(super) fn send_up(&mut self, link: u64, bytes: &[u8], fin: bool) {
        let Some(entry) = self.links.get(&link) else {
            return;
        };
        let (publisher, up) = (entry.publisher, entry.up_subscribe);
        match up {
            Some(up) => {
                if let Some(stream) = self.stream_mut(publisher, up) {
                    stream.tx.extend_from_slice(bytes);
                    stream.tx_fin |= fin;
                }
            }
            // Cancelled before the SUBSCRIBE went out: nothing more to send up.
            None if fin && self.links.get(&link).is_some_and(|l| l.subscribe.is_some()) => {
                self.forget_link(link);
            }
            None => {}
        }
    }

    /// Ends a link after a reset on either side: the other side is reset with `code`.
    pub(super) fn end_link(&mut self, link: u64, code: Option<u64>) {
        let Some(entry) = self.links.get(&link) else {
            return;
        };
        let code = code.unwrap_or(code::CANCEL);
        let (down, publisher, up) = (entry.down, entry.publisher, entry.up_subscribe);
        if let Some(client) = self.client_mut(down.0) {
            refuse(&mut client.conn, down.1, code);
            if let Some(stream) = client.streams.get_mut(&down.1) {
                stream.role = Role::Discard;
                stream.tx.clear();
                stream.tx_done = true;
            }
        }
        if let (Some(up), Some(client)) = (up, self.client_mut(publisher)) {
            refuse(&mut client.conn, up, code::CANCEL);
            if let Some(stream) = client.streams.get_mut(&up) {
                stream.role = Role::Discard;
                stream.tx.clear();
                stream.tx_done = true;
            }
        }
        self.forget_link(link);
    }

    pub(super) fn forget_link(&mut self, link: u64) {
        if let Some(entry) = self.links.remove(&link)
            && let Some((_, up_id)) = entry.subscribe
        {
            self.by_upstream_id.remove(&(entry.publisher, up_id));
        }
    }

    /// A closed client: its broadcasts end, its links end on the other side.
    pub(super) fn forget(&mut self, index: usize) {
        self.unannounce_all(index);
        let links: Vec<u64> = self
            .links
            .iter()
            .filter(|(_, link)| link.down.0 == index || link.publisher == index)
            .map(|(id, _)| *id)
            .collect();
        for link in links {
            self.end_link(link, Some(code::CANCEL));
        }
        if let Some(client) = self.client_mut(index) {
            client.streams.clear();
        }
    }
}
