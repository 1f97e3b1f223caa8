//! The worker's receive buffers: a provided-buffer ring the kernel picks from for every
//! `recvmsg` of the worker's sockets.
//!
//! Two ways to consume a buffer, chosen by the probe:
//!
//! - **incremental** (`IOU_PBUF_RING_INC` with `min_left`): each receive takes only the bytes
//!   it needs from the current buffer, so one large buffer holds hundreds of small chat
//!   datagrams. `min_left` is set to the largest receive (a GRO train and its headers): the
//!   kernel retires a buffer whose tail is smaller, so no datagram is ever cut short;
//! - **whole**: every receive takes a buffer of its own, each big enough for the largest
//!   receive. For kernels without `min_left`, where a buffer's short tail would truncate a
//!   datagram (and a tail too short for the headers would end the receive with `EFAULT`).
//!
//! A buffer goes back to the ring as soon as the worker has handled the receives in it: the
//! endpoint decrypts each datagram in place and copies what it keeps, within the turn.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;

/// The size of the header the kernel writes before each receive's name (`io_uring_recvmsg_out`).
pub(crate) const RECVMSG_OUT: usize = 16;

/// How buffers are consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consumption {
    /// Each receive takes what it needs; a tail under `min_left` bytes is retired.
    Incremental { min_left: u32 },
    /// Each receive takes a whole buffer.
    Whole,
}

/// A provided-buffer ring and the memory of its buffers.
pub(crate) struct BufferRing {
    /// The ring's entries: `entries` of them, page-aligned, shared with the kernel.
    ring: NonNull<BufRingEntry>,
    ring_layout: Layout,
    /// The buffers, back to back.
    memory: NonNull<u8>,
    memory_layout: Layout,
    entries: u16,
    buffer_size: u32,
    group: u16,
    consumption: Consumption,
    /// Our copy of the ring's tail.
    tail: u16,
    /// With incremental consumption: how far into each buffer the kernel has consumed.
    offsets: Vec<u32>,
    /// Whether the kernel holds the ring (registered and not yet unregistered).
    registered: bool,
}

/// Where one receive's bytes are, and whether its buffer is done.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    pub(crate) buffer: u16,
    pub(crate) offset: u32,
    pub(crate) len: u32,
    /// The kernel will use the rest of this buffer for later receives.
    pub(crate) more: bool,
}

impl BufferRing {
    /// `count` buffers (a power of two, at most 32,768) of `buffer_size` bytes, all in the
    /// ring, not yet registered.
    pub(crate) fn new(
        group: u16,
        count: u16,
        buffer_size: u32,
        consumption: Consumption,
    ) -> std::io::Result<Self> {
        if !count.is_power_of_two() || count > 1 << 15 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{count} receive buffers: a power of two up to 32768"),
            ));
        }
        let page = 4096;
        let ring_layout = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            page,
        )
        .map_err(std::io::Error::other)?;
        let memory_layout =
            Layout::from_size_align(usize::from(count) * buffer_size as usize, page)
                .map_err(std::io::Error::other)?;
        // SAFETY: both layouts have a non-zero size (count >= 1, buffer_size checked by
        // the caller's constants) and a valid alignment.
        let (ring, memory) = unsafe { (alloc_zeroed(ring_layout), alloc_zeroed(memory_layout)) };
        let (Some(ring), Some(memory)) = (NonNull::new(ring.cast()), NonNull::new(memory)) else {
            return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
        };
        let mut buffers = Self {
            ring,
            ring_layout,
            memory,
            memory_layout,
            entries: count,
            buffer_size,
            group,
            consumption,
            tail: 0,
            offsets: vec![0; usize::from(count)],
            registered: false,
        };
        for buffer in 0..count {
            buffers.push(buffer);
        }
        buffers.publish();
        Ok(buffers)
    }

    /// The buffer group id receives name.
    pub(crate) fn group(&self) -> u16 {
        self.group
    }

    /// Hands the ring to the kernel.
    pub(crate) fn register(&mut self, ring: &io_uring::IoUring) -> std::io::Result<()> {
        let (flags, min_left) = match self.consumption {
            Consumption::Incremental { min_left } => (IOU_PBUF_RING_INC, min_left),
            Consumption::Whole => (0, 0),
        };
        register_buf_ring(
            ring,
            self.ring.as_ptr() as u64,
            u32::from(self.entries),
            self.group,
            flags,
            min_left,
        )?;
        self.registered = true;
        Ok(())
    }

    /// Takes the ring back from the kernel. Only then may the memory be freed: call it
    /// once no receive that selects from it is in flight.
    pub(crate) fn unregister(&mut self, ring: &io_uring::IoUring) -> std::io::Result<()> {
        ring.submitter().unregister_buf_ring(self.group)?;
        self.registered = false;
        Ok(())
    }

    /// Where the bytes of a receive that completed with `result` bytes from `buffer`
    /// are, and (from its completion's flags) whether the kernel keeps using the buffer.
    pub(crate) fn received(&mut self, buffer: u16, result: u32, flags: u32) -> Option<Received> {
        let index = usize::from(buffer);
        if index >= usize::from(self.entries) {
            return None;
        }
        let more = io_uring::cqueue::buffer_more(flags);
        let offset = match self.consumption {
            Consumption::Incremental { .. } => {
                let offset = self.offsets[index];
                self.offsets[index] = if more {
                    offset.saturating_add(result)
                } else {
                    0
                };
                offset
            }
            Consumption::Whole => 0,
        };
        if offset.saturating_add(result) > self.buffer_size {
            return None;
        }
        Some(Received {
            buffer,
            offset,
            len: result,
            more,
        })
    }

    /// The bytes of `received`, to read (and decrypt in place) before the buffer goes back.
    pub(crate) fn bytes(&mut self, received: &Received) -> &mut [u8] {
        let start = received.buffer as usize * self.buffer_size as usize + received.offset as usize;
        // SAFETY: `received` came from `received()`, which checked that the range lies within
        // the buffer (and so within `memory`); the kernel wrote these bytes before posting
        // the completion and writes no more to them until the buffer is back in the ring,
        // which takes `&mut self`.
        unsafe {
            std::slice::from_raw_parts_mut(self.memory.as_ptr().add(start), received.len as usize)
        }
    }

    /// Puts a buffer the kernel finished with back in the ring (visible to the kernel at
    /// the next [`publish`](Self::publish)).
    pub(crate) fn give_back(&mut self, buffer: u16) {
        self.offsets[usize::from(buffer)] = 0;
        self.push(buffer);
    }

    /// Makes the buffers given back visible to the kernel.
    pub(crate) fn publish(&mut self) {
        // SAFETY: the tail is the u16 at the end of the ring's first entry (the kernel's
        // `struct io_uring_buf_ring` overlays it there), within the ring allocation and
        // aligned for a u16; the kernel only reads it.
        let tail = unsafe { &*BufRingEntry::tail(self.ring.as_ptr()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    fn push(&mut self, buffer: u16) {
        let slot = usize::from(self.tail & (self.entries - 1));
        // SAFETY: `slot` < `entries`, the ring's length; the kernel reads entries only up to
        // the published tail, and this one is past it until `publish`.
        let entry = unsafe { &mut *self.ring.as_ptr().add(slot) };
        // SAFETY: buffer < entries, so the offset lies within `memory`.
        let address = unsafe {
            self.memory
                .as_ptr()
                .add(usize::from(buffer) * self.buffer_size as usize)
        };
        entry.set_addr(address as u64);
        entry.set_len(self.buffer_size);
        entry.set_bid(buffer);
        self.tail = self.tail.wrapping_add(1);
    }
}

impl Drop for BufferRing {
    fn drop(&mut self) {
        if self.registered {
            // The kernel may still write to the buffers: leaking them is the safe choice.
            tracing::warn!(
                group = self.group,
                "receive buffers still registered at drop; leaked"
            );
            return;
        }
        // SAFETY: allocated in `new` with these layouts; the kernel no longer holds them.
        unsafe {
            dealloc(self.ring.as_ptr().cast(), self.ring_layout);
            dealloc(self.memory.as_ptr(), self.memory_layout);
        }
    }
}

impl std::fmt::Debug for BufferRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferRing")
            .field("group", &self.group)
            .field("entries", &self.entries)
            .field("buffer_size", &self.buffer_size)
            .field("consumption", &self.consumption)
            .finish_non_exhaustive()
    }
}

/// `IOU_PBUF_RING_INC`: buffers consumed incrementally (Linux 6.12).
const IOU_PBUF_RING_INC: u16 = 2;

/// `struct io_uring_buf_reg` as of the `min_left` field (the io-uring crate's copy of the
/// struct predates it, so the registration is made here).
#[repr(C)]
struct BufRegistration {
    ring_addr: u64,
    ring_entries: u32,
    bgid: u16,
    flags: u16,
    min_left: u32,
    reserved: [u32; 5],
}

/// `IORING_REGISTER_PBUF_RING` with `min_left`. A kernel that does not know `min_left`
/// finds it in a field it requires to be zero, and refuses with `EINVAL`.
fn register_buf_ring(
    ring: &io_uring::IoUring,
    ring_addr: u64,
    entries: u32,
    group: u16,
    flags: u16,
    min_left: u32,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const IORING_REGISTER_PBUF_RING: libc::c_uint = 22;
    let registration = BufRegistration {
        ring_addr,
        ring_entries: entries,
        bgid: group,
        flags,
        min_left,
        reserved: [0; 5],
    };
    // SAFETY: the argument is a live `io_uring_buf_reg` (40 bytes, as the kernel reads it)
    // for the duration of the call; the ring memory it names is owned by the caller's
    // `BufferRing`, which keeps it until it unregisters.
    let result = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring.as_raw_fd(),
            IORING_REGISTER_PBUF_RING,
            &registration as *const BufRegistration,
            1,
        )
    };
    if result < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_is_the_kernels_forty_bytes() {
        assert_eq!(std::mem::size_of::<BufRegistration>(), 40);
    }

    #[test]
    fn incremental_receives_walk_a_buffer_until_it_is_retired() {
        let mut ring =
            BufferRing::new(0, 4, 1024, Consumption::Incremental { min_left: 100 }).unwrap();
        let first = ring.received(2, 300, io_uring_flags(true)).unwrap();
        assert_eq!((first.offset, first.len, first.more), (0, 300, true));
        let second = ring.received(2, 200, io_uring_flags(true)).unwrap();
        assert_eq!(second.offset, 300);
        let last = ring.received(2, 100, io_uring_flags(false)).unwrap();
        assert_eq!((last.offset, last.more), (500, false));
        ring.give_back(2);
        let again = ring.received(2, 10, io_uring_flags(true)).unwrap();
        assert_eq!(again.offset, 0, "a buffer given back starts over");
        assert!(ring.received(9, 10, 0).is_none(), "no such buffer");
        assert!(ring.received(1, 2000, 0).is_none(), "past the buffer");
    }

    #[test]
    fn whole_receives_start_at_their_buffer() {
        let mut ring = BufferRing::new(0, 2, 4096, Consumption::Whole).unwrap();
        let received = ring.received(1, 1500, 0).unwrap();
        assert_eq!(received.offset, 0);
        ring.bytes(&received)[0] = 7;
        assert!(
            BufferRing::new(0, 3, 4096, Consumption::Whole).is_err(),
            "not a power of two"
        );
    }

    fn io_uring_flags(more: bool) -> u32 {
        const IORING_CQE_F_BUF_MORE: u32 = 1 << 4;
        if more { IORING_CQE_F_BUF_MORE } else { 0 }
    }
}
