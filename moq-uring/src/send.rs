//! Sends in flight: each batch of datagrams the endpoint produced, with the `msghdr` the
//! ring reads, held until its completion.
//!
//! The kernel reads a `sendmsg`'s header, address, iovec, control message and payload
//! when it runs the operation, which may be after the submitting call returned (a full
//! socket buffer makes the ring wait for room). So each batch lives in a boxed slot whose
//! address does not move until its completion arrives; then its buffer goes back to the
//! endpoint's pool.
//!
//! With GSO on, a batch is one `sendmsg` carrying an explicit `UDP_SEGMENT` control message
//! (DESIGN.md, "UDP batching": never a socket default); with it off, one `sendmsg` per
//! datagram and no control message.

use std::net::SocketAddr;

use moqx_runtime::endpoint::Transmit;

use crate::cmsg::SendControl;

/// The batches in flight on one worker.
pub(crate) struct Sends {
    slots: Vec<Option<Box<SendSlot>>>,
    free: Vec<u32>,
    in_flight: usize,
    /// Payload bytes of the batches in flight.
    bytes_in_flight: usize,
    gso: bool,
}

/// One batch and everything its `sendmsg`s point at.
struct SendSlot {
    transmit: Transmit,
    address: Address,
    control: SendControl,
    /// One per `sendmsg`: the whole batch with GSO, each datagram without.
    parts: Vec<Part>,
    /// Parts whose completion has not arrived.
    remaining: usize,
}

struct Part {
    iov: libc::iovec,
    header: libc::msghdr,
}

/// A destination as the kernel reads it.
#[repr(C)]
union Address {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

/// A `sendmsg` to submit: the header's address and the slot it belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prepared {
    pub(crate) header: *const libc::msghdr,
    pub(crate) slot: u32,
}

impl Sends {
    pub(crate) fn new(gso: bool) -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            bytes_in_flight: 0,
            gso,
        }
    }

    /// Batches whose completions have not all arrived.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Their payload bytes: what the kernel has yet to take (a full socket buffer parks a
    /// `sendmsg` in the ring, its batch held here).
    pub(crate) fn bytes_in_flight(&self) -> usize {
        self.bytes_in_flight
    }

    /// Holds `transmit` until its sends complete and appends a `sendmsg` per part to
    /// `out`.
    pub(crate) fn prepare(&mut self, transmit: Transmit, out: &mut Vec<Prepared>) {
        let segment_size = transmit.segment_size.clamp(1, usize::from(u16::MAX));
        let mut slot = Box::new(SendSlot {
            address: Address::from(transmit.destination),
            // One GSO send per batch says its segment size; a send per datagram needs
            // none. Either says the source address where one is chosen.
            control: SendControl::new(self.gso.then_some(segment_size as u16), transmit.source),
            parts: Vec::new(),
            remaining: 0,
            transmit,
        });
        let chunk = if self.gso {
            slot.transmit.contents.len().max(1)
        } else {
            segment_size
        };
        let contents = slot.transmit.contents.as_mut_ptr();
        let total = slot.transmit.contents.len();
        let mut offset = 0;
        loop {
            let len = chunk.min(total - offset);
            slot.parts.push(Part {
                iov: libc::iovec {
                    // SAFETY: `offset` <= `total`, the buffer's length: the pointer stays
                    // within the allocation or one past it (with `len` 0).
                    iov_base: unsafe { contents.add(offset) }.cast(),
                    iov_len: len,
                },
                // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
                header: unsafe { std::mem::zeroed() },
            });
            offset += len;
            if offset >= total {
                break;
            }
        }
        // The slot is boxed and its parts no longer grow: every address taken below stays
        // valid until the slot is freed, after the last completion.
        let address_len = address_len(slot.transmit.destination);
        let address: *mut Address = &mut slot.address;
        let control = slot.control.as_ptr();
        let control_len = slot.control.len();
        for part in &mut slot.parts {
            part.header.msg_name = address.cast();
            part.header.msg_namelen = address_len;
            part.header.msg_iov = &mut part.iov;
            part.header.msg_iovlen = 1;
            if control_len > 0 {
                part.header.msg_control = control.cast_mut().cast();
                part.header.msg_controllen = control_len;
            }
        }
        slot.remaining = slot.parts.len();
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(None);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 sends")
            }
        };
        for part in &slot.parts {
            out.push(Prepared {
                header: &part.header,
                slot: index,
            });
        }
        self.bytes_in_flight += slot.transmit.contents.len();
        self.slots[index as usize] = Some(slot);
        self.in_flight += 1;
    }

    /// One `sendmsg` of `slot` completed with `result` (bytes sent, or `-errno`): says
    /// whether it failed, and gives the batch back once all of its parts completed.
    pub(crate) fn complete(&mut self, slot: u32, result: i32) -> Completion {
        let mut completion = Completion::default();
        let Some(entry) = self.slots.get_mut(slot as usize) else {
            return completion;
        };
        let Some(batch) = entry.as_mut() else {
            return completion;
        };
        if result < 0 {
            let datagrams = if batch.parts.len() == 1 {
                batch
                    .transmit
                    .contents
                    .len()
                    .div_ceil(batch.transmit.segment_size.max(1))
                    .max(1)
            } else {
                1
            };
            completion.failure = Some(SendFailure {
                error: std::io::Error::from_raw_os_error(-result),
                destination: batch.transmit.destination,
                datagrams,
            });
        }
        batch.remaining -= 1;
        if batch.remaining > 0 {
            return completion;
        }
        if let Some(batch) = entry.take() {
            self.free.push(slot);
            self.in_flight -= 1;
            self.bytes_in_flight -= batch.transmit.contents.len();
            completion.finished = Some(batch.transmit);
        }
        completion
    }
}

/// What one `sendmsg` completion means: see [`Sends::complete`].
#[derive(Debug, Default)]
pub(crate) struct Completion {
    /// The send failed: its datagrams were lost.
    pub(crate) failure: Option<SendFailure>,
    /// The batch, once every part of it completed: its buffer goes back to the endpoint.
    pub(crate) finished: Option<Transmit>,
}

/// A refused `sendmsg`.
#[derive(Debug)]
pub(crate) struct SendFailure {
    pub(crate) error: std::io::Error,
    pub(crate) destination: SocketAddr,
    pub(crate) datagrams: usize,
}

impl From<SocketAddr> for Address {
    fn from(address: SocketAddr) -> Self {
        match address {
            SocketAddr::V4(v4) => Self {
                v4: libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                },
            },
            SocketAddr::V6(v6) => Self {
                v6: libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                },
            },
        }
    }
}

/// The bytes of `address` as a `sockaddr`.
fn address_len(address: SocketAddr) -> libc::socklen_t {
    let len = match address {
        SocketAddr::V4(_) => std::mem::size_of::<libc::sockaddr_in>(),
        SocketAddr::V6(_) => std::mem::size_of::<libc::sockaddr_in6>(),
    };
    len as libc::socklen_t
}

impl std::fmt::Debug for Sends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sends")
            .field("in_flight", &self.in_flight)
            .field("gso", &self.gso)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transmit(datagrams: usize, segment_size: usize) -> Transmit {
        Transmit {
            destination: "127.0.0.1:4433".parse().unwrap(),
            source: None,
            contents: vec![7; datagrams * segment_size - 10],
            segment_size,
        }
    }

    #[test]
    fn with_gso_a_batch_is_one_sendmsg_with_its_segment_size() {
        let mut sends = Sends::new(true);
        let mut out = Vec::new();
        sends.prepare(transmit(5, 1200), &mut out);
        assert_eq!(out.len(), 1);
        // SAFETY: the slot is alive until its completion below.
        let header = unsafe { &*out[0].header };
        assert_eq!(header.msg_iovlen, 1);
        assert_eq!(
            header.msg_controllen,
            crate::cmsg::SendControl::new(Some(1200), None).len()
        );
        // SAFETY: as above.
        assert_eq!(unsafe { &*header.msg_iov }.iov_len, 5 * 1200 - 10);
        assert_eq!(sends.in_flight(), 1);
        let completion = sends.complete(out[0].slot, 5990);
        assert!(completion.failure.is_none());
        let back = completion.finished.expect("the batch is done");
        assert_eq!(back.contents.len(), 5990);
        assert_eq!(sends.in_flight(), 0);
    }

    #[test]
    fn without_gso_each_datagram_is_its_own_sendmsg() {
        let mut sends = Sends::new(false);
        let mut out = Vec::new();
        sends.prepare(transmit(3, 1000), &mut out);
        assert_eq!(out.len(), 3);
        let lengths: Vec<usize> = out
            .iter()
            // SAFETY: the slot is alive until its completions below.
            .map(|prepared| unsafe { &*(*prepared.header).msg_iov }.iov_len)
            .collect();
        assert_eq!(lengths, [1000, 1000, 990]);
        let controls: Vec<usize> = out
            .iter()
            // SAFETY: as above.
            .map(|prepared| unsafe { &*prepared.header }.msg_controllen)
            .collect();
        assert_eq!(controls, [0, 0, 0]);
        assert!(sends.complete(out[0].slot, 1000).finished.is_none());
        let failed = sends.complete(out[1].slot, -libc::ENOBUFS);
        assert!(failed.finished.is_none());
        let failure = failed.failure.expect("a refused send is reported");
        assert_eq!(failure.datagrams, 1);
        assert_eq!(failure.error.raw_os_error(), Some(libc::ENOBUFS));
        assert!(sends.complete(out[2].slot, 990).finished.is_some());
        // The slot is reused.
        let mut again = Vec::new();
        sends.prepare(transmit(1, 100), &mut again);
        assert_eq!(again[0].slot, out[0].slot);
    }
}
