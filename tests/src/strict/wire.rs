//! moq-lite-05, -04 and -03 on the wire, as the strict peer reads and writes them: written
//! from `shared/spec/moq-lite-05.md` alone (its messages, and its "Version deltas" for the
//! older two), sharing no code with `moqx_net::coding`, so that the two can disagree (and a
//! test then says which one is wrong).
//!
//! Decoding is as strict as a deployed peer: a message is `Length (i)` and a body of
//! exactly that many bytes (trailing bytes are an error), a `bool` is 0 or 1, an announce
//! status is 0, 1 or 2, hop lists hold at most 32 ids, SETUP at most 64 parameters and no
//! duplicate ids.

use std::fmt;

/// Why bytes did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// More bytes are needed.
    Short,
    /// The bytes break the spec: what was wrong.
    Invalid(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Short => f.write_str("truncated"),
            WireError::Invalid(what) => f.write_str(what),
        }
    }
}

/// The versions the strict peer speaks (its own type: it shares nothing with `moqx_net`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lite {
    /// moq-lite-03: no SETUP, hop counts, SUBSCRIBE_OK, no TRACK, no frame timestamps.
    V03,
    /// moq-lite-04: -03 with hop id lists (the sender appends itself) and Exclude Hop.
    V04,
    /// moq-lite-05.
    V05,
}

impl Lite {
    /// Every version, in the order the strict relay prefers them.
    pub const ALL: [Lite; 3] = [Lite::V05, Lite::V04, Lite::V03];

    /// Its ALPN.
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Lite::V03 => b"moq-lite-03",
            Lite::V04 => b"moq-lite-04",
            Lite::V05 => b"moq-lite-05",
        }
    }

    /// The version an ALPN names.
    pub fn from_alpn(alpn: &[u8]) -> Option<Self> {
        Self::ALL.into_iter().find(|lite| lite.alpn() == alpn)
    }

    /// -05 has SETUP, ANNOUNCE_OK, TRACK, frame timestamps and START/END replies; the two
    /// before it have none of them.
    pub fn is_05(self) -> bool {
        self == Lite::V05
    }
}

fn invalid<T>(what: impl Into<String>) -> Result<T, WireError> {
    Err(WireError::Invalid(what.into()))
}

/// Reads a QUIC varint.
pub fn read_varint(buf: &mut &[u8]) -> Result<u64, WireError> {
    let first = *buf.first().ok_or(WireError::Short)?;
    let len = 1usize << (first >> 6);
    if buf.len() < len {
        return Err(WireError::Short);
    }
    let mut value = u64::from(first & 0x3f);
    for byte in &buf[1..len] {
        value = (value << 8) | u64::from(*byte);
    }
    *buf = &buf[len..];
    Ok(value)
}

/// Writes a QUIC varint (the shortest encoding).
pub fn write_varint(out: &mut Vec<u8>, value: u64) {
    if value < 1 << 6 {
        out.push(value as u8);
    } else if value < 1 << 14 {
        out.extend_from_slice(&((value as u16) | 0x4000).to_be_bytes());
    } else if value < 1 << 30 {
        out.extend_from_slice(&((value as u32) | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(value | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

fn read_u8(buf: &mut &[u8]) -> Result<u8, WireError> {
    let (&byte, rest) = buf.split_first().ok_or(WireError::Short)?;
    *buf = rest;
    Ok(byte)
}

fn read_bytes<'a>(buf: &mut &'a [u8], len: usize) -> Result<&'a [u8], WireError> {
    if buf.len() < len {
        return Err(WireError::Short);
    }
    let (bytes, rest) = buf.split_at(len);
    *buf = rest;
    Ok(bytes)
}

/// Reads a varint-length UTF-8 string.
pub fn read_string(buf: &mut &[u8]) -> Result<String, WireError> {
    let len = usize::try_from(read_varint(buf)?).unwrap_or(usize::MAX);
    let bytes = read_bytes(buf, len)?;
    String::from_utf8(bytes.to_vec()).or_else(|_| invalid("a string that is not UTF-8"))
}

/// Writes a varint-length string.
pub fn write_string(out: &mut Vec<u8>, text: &str) {
    write_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// Splits one `Length (i) | Body` message off the front of `buf`: `Ok(None)` until it is
/// all there; otherwise the body and how many bytes the message took.
pub fn take_message(buf: &[u8]) -> Result<Option<(&[u8], usize)>, WireError> {
    let mut cursor = buf;
    let len = match read_varint(&mut cursor) {
        Ok(len) => usize::try_from(len).unwrap_or(usize::MAX),
        Err(WireError::Short) => return Ok(None),
        Err(error) => return Err(error),
    };
    if cursor.len() < len {
        return Ok(None);
    }
    let header = buf.len() - cursor.len();
    Ok(Some((&cursor[..len], header + len)))
}

/// Frames `body` as a message: its length, then it.
pub fn message(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    write_varint(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    out
}

/// Decodes a whole message body with `decode`, which must consume it exactly.
pub fn decode_body<T>(
    body: &[u8],
    what: &str,
    decode: impl FnOnce(&mut &[u8]) -> Result<T, WireError>,
) -> Result<T, WireError> {
    let mut cursor = body;
    let value = match decode(&mut cursor) {
        Ok(value) => value,
        Err(WireError::Short) => return invalid(format!("{what}: the body ends early")),
        Err(error) => return Err(error),
    };
    if !cursor.is_empty() {
        return invalid(format!("{what}: {} trailing bytes", cursor.len()));
    }
    Ok(value)
}

/// Normalizes a broadcast path: no leading, trailing or repeated `/`, at most 32 parts.
pub fn normalize(path: &str) -> Result<String, WireError> {
    let parts: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
    if parts.len() > 32 {
        return invalid(format!("a path of {} parts", parts.len()));
    }
    Ok(parts.join("/"))
}

/// `prefix` joined with `suffix`, both normalized.
pub fn join(prefix: &str, suffix: &str) -> String {
    match (prefix.is_empty(), suffix.is_empty()) {
        (true, _) => suffix.to_owned(),
        (_, true) => prefix.to_owned(),
        _ => format!("{prefix}/{suffix}"),
    }
}

/// `path` relative to `prefix` (whole parts only), if it lies under it.
pub fn strip<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    if prefix.is_empty() {
        return Some(path);
    }
    let rest = path.strip_prefix(prefix)?;
    if rest.is_empty() {
        return Some(rest);
    }
    rest.strip_prefix('/')
}

/// The SETUP message (uni stream type 1): its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// `(id, value)` in the order received.
    pub parameters: Vec<(u64, Vec<u8>)>,
}

impl Setup {
    /// The raw value of parameter `id`.
    pub fn parameter(&self, id: u64) -> Option<&[u8]> {
        self.parameters
            .iter()
            .find(|(known, _)| *known == id)
            .map(|(_, value)| value.as_slice())
    }

    /// Decodes a SETUP body: at most 64 parameters, no duplicate ids.
    pub fn decode(buf: &mut &[u8]) -> Result<Self, WireError> {
        let count = read_varint(buf)?;
        if count > 64 {
            return invalid(format!("SETUP with {count} parameters (at most 64)"));
        }
        let mut parameters: Vec<(u64, Vec<u8>)> = Vec::new();
        for _ in 0..count {
            let id = read_varint(buf)?;
            let len = usize::try_from(read_varint(buf)?).unwrap_or(usize::MAX);
            let value = read_bytes(buf, len)?.to_vec();
            if parameters.iter().any(|(known, _)| *known == id) {
                return invalid(format!("SETUP repeats parameter {id}"));
            }
            parameters.push((id, value));
        }
        Ok(Self { parameters })
    }
}

/// ANNOUNCE_REQUEST: the first message of an announce stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnounceRequest {
    /// The prefix asked about.
    pub prefix: String,
    /// The asker's own origin id (0 for none; not on -03).
    pub exclude_hop: u64,
}

impl AnnounceRequest {
    /// Decodes the body.
    pub fn decode(buf: &mut &[u8], lite: Lite) -> Result<Self, WireError> {
        Ok(Self {
            prefix: read_string(buf)?,
            exclude_hop: match lite {
                Lite::V03 => 0,
                _ => read_varint(buf)?,
            },
        })
    }

    /// The whole message.
    pub fn encode(&self, lite: Lite) -> Vec<u8> {
        let mut body = Vec::new();
        write_string(&mut body, &self.prefix);
        if lite != Lite::V03 {
            write_varint(&mut body, self.exclude_hop);
        }
        message(&body)
    }
}

/// ANNOUNCE_OK: the answer, then `active_count` ANNOUNCEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnounceOk {
    /// The answering side's origin id.
    pub hop_id: u64,
    /// How many ANNOUNCEs follow as the initial set.
    pub active_count: u64,
}

impl AnnounceOk {
    /// Decodes the body.
    pub fn decode(buf: &mut &[u8]) -> Result<Self, WireError> {
        Ok(Self {
            hop_id: read_varint(buf)?,
            active_count: read_varint(buf)?,
        })
    }

    /// The whole message.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        write_varint(&mut body, self.hop_id);
        write_varint(&mut body, self.active_count);
        message(&body)
    }
}

/// ANNOUNCE: a broadcast became active, or ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    /// Active (a restart, status 2, decodes as active).
    pub active: bool,
    /// The path relative to the request's prefix.
    pub suffix: String,
    /// The route so far (on -05 the sender omits itself; on -04 it appends itself; on -03
    /// only their count travels, read back as that many unknown ids, 0).
    pub hops: Vec<u64>,
}

impl Announce {
    /// Decodes the body.
    pub fn decode(buf: &mut &[u8], lite: Lite) -> Result<Self, WireError> {
        let active = match read_u8(buf)? {
            0 => false,
            1 => true,
            2 if lite.is_05() => true,
            other => return invalid(format!("announce status {other} on {lite:?}")),
        };
        let suffix = read_string(buf)?;
        let count = read_varint(buf)?;
        if count > 32 {
            return invalid(format!("an announce with {count} hops (at most 32)"));
        }
        let hops = match lite {
            Lite::V03 => vec![0; count as usize],
            _ => (0..count)
                .map(|_| read_varint(buf))
                .collect::<Result<_, _>>()?,
        };
        Ok(Self {
            active,
            suffix,
            hops,
        })
    }

    /// The whole message.
    pub fn encode(&self, lite: Lite) -> Vec<u8> {
        let mut body = vec![u8::from(self.active)];
        write_string(&mut body, &self.suffix);
        write_varint(&mut body, self.hops.len() as u64);
        if lite != Lite::V03 {
            for hop in &self.hops {
                write_varint(&mut body, *hop);
            }
        }
        message(&body)
    }
}

/// TRACK: the first message of a track stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// The broadcast's path.
    pub broadcast: String,
    /// The track's name.
    pub track: String,
}

impl Track {
    /// Decodes the body.
    pub fn decode(buf: &mut &[u8]) -> Result<Self, WireError> {
        Ok(Self {
            broadcast: read_string(buf)?,
            track: read_string(buf)?,
        })
    }

    /// The whole message.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        write_string(&mut body, &self.broadcast);
        write_string(&mut body, &self.track);
        message(&body)
    }
}

/// Checks a TRACK_INFO body: priority, ordered, latency, a non-zero timescale.
pub fn check_track_info(buf: &mut &[u8]) -> Result<(), WireError> {
    read_u8(buf)?;
    read_u8(buf)?;
    read_varint(buf)?;
    if read_varint(buf)? == 0 {
        return invalid("TRACK_INFO with timescale 0");
    }
    Ok(())
}

/// SUBSCRIBE: the first message of a subscribe stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// The subscriber's id for it, which its groups carry.
    pub id: u64,
    /// The broadcast's path.
    pub broadcast: String,
    /// The track's name.
    pub track: String,
    /// Subscriber priority.
    pub priority: u8,
    /// Ordered delivery (non-zero means true).
    pub ordered: u8,
    /// Max latency in ms.
    pub max_latency: u64,
    /// First group (0 = latest, else sequence + 1).
    pub start: u64,
    /// Last group (0 = open, else sequence + 1).
    pub end: u64,
}

impl Subscribe {
    /// Decodes the body.
    pub fn decode(buf: &mut &[u8]) -> Result<Self, WireError> {
        Ok(Self {
            id: read_varint(buf)?,
            broadcast: read_string(buf)?,
            track: read_string(buf)?,
            priority: read_u8(buf)?,
            ordered: read_u8(buf)?,
            max_latency: read_varint(buf)?,
            start: read_varint(buf)?,
            end: read_varint(buf)?,
        })
    }

    /// The whole message.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        write_varint(&mut body, self.id);
        write_string(&mut body, &self.broadcast);
        write_string(&mut body, &self.track);
        body.push(self.priority);
        body.push(self.ordered);
        write_varint(&mut body, self.max_latency);
        write_varint(&mut body, self.start);
        write_varint(&mut body, self.end);
        message(&body)
    }
}

/// Checks a SUBSCRIBE_UPDATE body.
pub fn check_subscribe_update(buf: &mut &[u8]) -> Result<(), WireError> {
    read_u8(buf)?;
    read_u8(buf)?;
    read_varint(buf)?;
    read_varint(buf)?;
    read_varint(buf)?;
    Ok(())
}

/// A publisher's typed reply on a subscribe stream, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// -03/-04 type 0: SUBSCRIBE_OK (its fields are ignored, as a deployed subscriber does).
    Ok,
    /// -05 type 0: SUBSCRIBE_START.
    Start,
    /// -05 type 1: SUBSCRIBE_END.
    End,
    /// SUBSCRIBE_DROP (type 1 before -05, 2 on it): start, end, error.
    Drop(u64, u64, u64),
}

impl Response {
    /// The reply as `lite` writes it: `None` where it has no such message (START and END
    /// before -05; OK on -05, where the first group says it).
    pub fn encode(self, lite: Lite) -> Option<Vec<u8>> {
        let (kind, body) = match (self, lite.is_05()) {
            (Response::Ok, false) => (0, vec![0, 0, 0, 0, 0]),
            (Response::Drop(start, end, error), is_05) => {
                let mut body = Vec::new();
                write_varint(&mut body, start);
                write_varint(&mut body, end);
                write_varint(&mut body, error);
                (if is_05 { 2 } else { 1 }, body)
            }
            _ => return None,
        };
        let mut out = Vec::new();
        write_varint(&mut out, kind);
        out.extend(message(&body));
        Some(out)
    }
}

/// SUBSCRIBE_START (`end` false) or SUBSCRIBE_END (`end` true) for `group`, as -05 writes
/// them: what a relay says to a -05 subscriber of a -03/-04 publisher, which says neither.
pub fn start_or_end(end: bool, group: u64) -> Vec<u8> {
    let mut body = Vec::new();
    write_varint(&mut body, group);
    let mut out = vec![u8::from(end)];
    out.extend(message(&body));
    out
}

/// Splits one typed subscribe response (`Type (i) | Length (i) | Body`) off the front of
/// `buf` and checks it for `lite`: `Ok(None)` until it is all there, else how many bytes it
/// took and what it was.
pub fn take_subscribe_response(
    buf: &[u8],
    lite: Lite,
) -> Result<Option<(usize, Response)>, WireError> {
    let mut cursor = buf;
    let kind = match read_varint(&mut cursor) {
        Ok(kind) => kind,
        Err(WireError::Short) => return Ok(None),
        Err(error) => return Err(error),
    };
    let header = buf.len() - cursor.len();
    let Some((body, taken)) = take_message(cursor)? else {
        return Ok(None);
    };
    let drop = |b: &mut &[u8]| -> Result<Response, WireError> {
        Ok(Response::Drop(
            read_varint(b)?,
            read_varint(b)?,
            read_varint(b)?,
        ))
    };
    let response = match (lite.is_05(), kind) {
        // SUBSCRIBE_OK: priority, ordered, max latency, start, end.
        (false, 0) => decode_body(body, "SUBSCRIBE_OK", |b| {
            read_u8(b)?;
            read_u8(b)?;
            read_varint(b)?;
            read_varint(b)?;
            read_varint(b)?;
            Ok(Response::Ok)
        })?,
        (false, 1) => decode_body(body, "SUBSCRIBE_DROP", drop)?,
        // SUBSCRIBE_START and SUBSCRIBE_END: a group.
        (true, 0) => decode_body(body, "SUBSCRIBE_START", |b| {
            read_varint(b).map(|_| Response::Start)
        })?,
        (true, 1) => decode_body(body, "SUBSCRIBE_END", |b| {
            read_varint(b).map(|_| Response::End)
        })?,
        (true, 2) => decode_body(body, "SUBSCRIBE_DROP", drop)?,
        (_, other) => return invalid(format!("subscribe response type {other} on {lite:?}")),
    };
    Ok(Some((header + taken, response)))
}

/// A GROUP header: which subscription and which group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupHeader {
    /// The subscription's id.
    pub subscribe_id: u64,
    /// The group's sequence.
    pub sequence: u64,
}

impl GroupHeader {
    /// Decodes the body.
    pub fn decode(buf: &mut &[u8]) -> Result<Self, WireError> {
        Ok(Self {
            subscribe_id: read_varint(buf)?,
            sequence: read_varint(buf)?,
        })
    }

    /// The stream type and the whole header.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        write_varint(&mut body, self.subscribe_id);
        write_varint(&mut body, self.sequence);
        let mut out = vec![0u8];
        out.extend(message(&body));
        out
    }
}

/// Splits one FRAME off the front of `buf`: `delta (i) | size (i) | payload` on -05,
/// `size (i) | payload` before. `Ok(None)` until it is all there, else how many bytes it
/// took, and the frame as `to` writes it (the same bytes when the versions agree; a zero
/// delta added, or the delta dropped, when they do not).
pub fn take_frame(buf: &[u8], from: Lite, to: Lite) -> Result<Option<(usize, Vec<u8>)>, WireError> {
    let mut cursor = buf;
    let parsed = match from.is_05() {
        true => read_varint(&mut cursor).and_then(|delta| Ok((delta, read_varint(&mut cursor)?))),
        false => read_varint(&mut cursor).map(|size| (0, size)),
    };
    let (delta, size) = match parsed {
        Ok((delta, size)) => (delta, usize::try_from(size).unwrap_or(usize::MAX)),
        Err(WireError::Short) => return Ok(None),
        Err(error) => return Err(error),
    };
    if cursor.len() < size {
        return Ok(None);
    }
    let taken = buf.len() - cursor.len() + size;
    if from.is_05() == to.is_05() {
        return Ok(Some((taken, buf[..taken].to_vec())));
    }
    let mut out = Vec::with_capacity(taken + 1);
    if to.is_05() {
        write_varint(&mut out, delta);
    }
    write_varint(&mut out, size as u64);
    out.extend_from_slice(&cursor[..size]);
    Ok(Some((taken, out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_length() {
        for value in [
            0,
            63,
            64,
            16_383,
            16_384,
            (1 << 30) - 1,
            1 << 30,
            (1 << 62) - 1,
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            let mut cursor = &out[..];
            assert_eq!(read_varint(&mut cursor), Ok(value));
            assert!(cursor.is_empty());
        }
    }

    #[test]
    fn the_spec_examples_decode() {
        // SETUP with Path "/": length 4; one parameter: id 2, length 1, "/".
        let (body, taken) = take_message(&[0x04, 0x01, 0x02, 0x01, b'/'])
            .unwrap()
            .unwrap();
        assert_eq!(taken, 5);
        let setup = decode_body(body, "SETUP", Setup::decode).unwrap();
        assert_eq!(setup.parameter(2), Some(&b"/"[..]));
        // ANNOUNCE active "demo", no hops: length 7.
        let bytes = [0x07, 0x01, 0x04, b'd', b'e', b'm', b'o', 0x00];
        let (body, _) = take_message(&bytes).unwrap().unwrap();
        let announce = decode_body(body, "ANNOUNCE", |b| Announce::decode(b, Lite::V05)).unwrap();
        assert_eq!(announce.suffix, "demo");
        assert_eq!(announce.encode(Lite::V05), bytes);
        // A one-frame group: type 0, GROUP(id 0, seq 0), FRAME(ts 0, "hi").
        let group = [0x00, 0x02, 0x00, 0x00, 0x00, 0x02, b'h', b'i'];
        let header = GroupHeader {
            subscribe_id: 0,
            sequence: 0,
        };
        assert_eq!(header.encode(), group[..4]);
        assert_eq!(
            take_frame(&group[4..], Lite::V05, Lite::V05),
            Ok(Some((4, group[4..].to_vec())))
        );
    }

    #[test]
    fn strict_decoding_refuses_what_a_deployed_peer_refuses() {
        // Trailing bytes in a body.
        assert!(decode_body(&[0x00, 0x00, 0x07], "ANNOUNCE_OK", AnnounceOk::decode).is_err());
        // A duplicate SETUP parameter.
        assert!(decode_body(&[0x02, 0x01, 0x00, 0x01, 0x00], "SETUP", Setup::decode).is_err());
        // An announce status of 3.
        assert!(
            decode_body(&[0x03, 0x00, 0x00], "ANNOUNCE", |b| Announce::decode(
                b,
                Lite::V05
            ))
            .is_err()
        );
        // A restart status before -05.
        assert!(
            decode_body(&[0x02, 0x00, 0x00], "ANNOUNCE", |b| Announce::decode(
                b,
                Lite::V04
            ))
            .is_err()
        );
        // An unknown subscribe response type; SUBSCRIBE_DROP's -05 type on -04.
        assert!(take_subscribe_response(&[0x05, 0x00], Lite::V05).is_err());
        assert!(take_subscribe_response(&[0x02, 0x03, 0x03, 0x05, 0x00], Lite::V04).is_err());
        // TRACK_INFO with timescale 0.
        assert!(decode_body(&[0, 0, 0, 0], "TRACK_INFO", check_track_info).is_err());
    }

    #[test]
    fn the_older_versions_read_as_the_spec_deltas_say() {
        // -03: an announce's hops are a count; -04: a list, the request has Exclude Hop.
        let bytes = [0x08, 0x01, 0x05, b'a', b'l', b'i', b'c', b'e', 0x03];
        let (body, _) = take_message(&bytes).unwrap().unwrap();
        let announce = decode_body(body, "ANNOUNCE", |b| Announce::decode(b, Lite::V03)).unwrap();
        assert_eq!(announce.hops, [0, 0, 0]);
        assert_eq!(announce.encode(Lite::V03), bytes);
        let request = AnnounceRequest {
            prefix: "a".into(),
            exclude_hop: 9,
        };
        assert_eq!(request.encode(Lite::V03), [0x02, 0x01, b'a']);
        assert_eq!(request.encode(Lite::V04), [0x03, 0x01, b'a', 0x09]);
        // SUBSCRIBE_OK as a deployed -04 publisher sends it, and DROP as type 1.
        assert_eq!(
            take_subscribe_response(&[0x00, 0x05, 0x01, 0x00, 0x00, 0x00, 0x00], Lite::V04),
            Ok(Some((7, Response::Ok)))
        );
        assert_eq!(
            Response::Drop(3, 5, 0).encode(Lite::V04),
            Some(vec![0x01, 0x03, 0x03, 0x05, 0x00])
        );
        assert_eq!(Response::Start.encode(Lite::V04), None);
        // A frame without a delta, translated both ways.
        assert_eq!(
            take_frame(&[0x02, b'h', b'i'], Lite::V04, Lite::V05),
            Ok(Some((3, vec![0x00, 0x02, b'h', b'i'])))
        );
        assert_eq!(
            take_frame(&[0x47, 0xd0, 0x02, b'h', b'i'], Lite::V05, Lite::V03),
            Ok(Some((5, vec![0x02, b'h', b'i'])))
        );
    }

    #[test]
    fn paths_join_and_strip_by_whole_parts() {
        assert_eq!(normalize("//a//b/").unwrap(), "a/b");
        assert_eq!(join("room", "alice"), "room/alice");
        assert_eq!(join("", "alice"), "alice");
        assert_eq!(strip("room/alice", "room"), Some("alice"));
        assert_eq!(strip("roomy/alice", "room"), None);
        assert_eq!(strip("room", "room"), Some(""));
    }
}
