//! A socket's multishot `recvmsg`: one submission that keeps posting a completion per
//! received datagram (or GRO train) into the worker's provided buffers, until it ends (the
//! buffers ran out, an error) and is armed again.
//!
//! Each completion's bytes are laid out by the kernel as `io_uring_recvmsg_out` (16 bytes:
//! the name, control and payload lengths, and flags), then the source address in a field of
//! [`RECV_NAME`] bytes, the control messages in a field of [`RECV_CONTROL`] bytes, then the
//! payload. Reads here go byte by byte: with incremental buffers a receive starts at any
//! offset, unaligned.

use std::net::SocketAddr;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use crate::buffers::RECVMSG_OUT;
use crate::cmsg::{self, RECV_CONTROL, RECV_NAME, RecvControl};

/// The largest payload one receive takes: a whole GRO train (the kernel coalesces up to
/// 64 KiB).
pub(crate) const MAX_PAYLOAD: usize = 65_536;

/// Bytes one receive may take from a buffer: headers, address, control messages, payload.
pub(crate) const MAX_RECEIVE: usize = RECVMSG_OUT + RECV_NAME + RECV_CONTROL + MAX_PAYLOAD;

/// The `msghdr` a socket's multishot receive was armed with. The kernel reads only its
/// name and control lengths (they lay out every completion's bytes), at each arming.
pub(crate) struct Receiver {
    header: Box<libc::msghdr>,
}

/// One completion's datagrams.
#[derive(Debug)]
pub(crate) struct Datagrams<'a> {
    pub(crate) source: SocketAddr,
    pub(crate) control: RecvControl,
    /// One datagram, or a GRO train of them every `control.segment_size` bytes.
    pub(crate) payload: &'a mut [u8],
    /// The payload did not fit (`MSG_TRUNC`): the train's tail is lost.
    pub(crate) truncated: bool,
}

impl Receiver {
    pub(crate) fn new() -> Self {
        // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
        let mut header: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        header.msg_namelen = RECV_NAME as libc::socklen_t;
        header.msg_controllen = RECV_CONTROL;
        Self { header }
    }

    /// The submission that arms the receive on `fd`, taking buffers from `group`.
    pub(crate) fn arm(&self, fd: RawFd, group: u16, user_data: u64) -> squeue::Entry {
        opcode::RecvMsgMulti::new(types::Fd(fd), &*self.header, group)
            .build()
            .user_data(user_data)
    }

    /// Reads one completion's bytes (`bytes`: what the completion's result says the
    /// receive took from its buffer). `None` if they are not laid out as armed.
    pub(crate) fn parse<'a>(&self, bytes: &'a mut [u8]) -> Option<Datagrams<'a>> {
        let field = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
        };
        let (name_len, control_len, payload_len, flags) =
            (field(0)?, field(4)?, field(8)?, field(12)?);
        let name_start = RECVMSG_OUT;
        let control_start = name_start + RECV_NAME;
        let payload_start = control_start + RECV_CONTROL;
        if bytes.len() < payload_start {
            return None;
        }
        let source = cmsg::parse_address(
            &bytes[name_start..name_start + (name_len as usize).min(RECV_NAME)],
        )?;
        let control = cmsg::parse(
            &bytes[control_start..control_start + (control_len as usize).min(RECV_CONTROL)],
        );
        let payload_end = payload_start + (payload_len as usize).min(bytes.len() - payload_start);
        Some(Datagrams {
            source,
            control,
            payload: &mut bytes[payload_start..payload_end],
            truncated: flags & libc::MSG_TRUNC as u32 != 0,
        })
    }
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_reads_back_as_laid_out() {
        let receiver = Receiver::new();
        let mut bytes = vec![0u8; RECVMSG_OUT + RECV_NAME + RECV_CONTROL + 5];
        bytes[0..4].copy_from_slice(&16u32.to_ne_bytes()); // sockaddr_in
        bytes[4..8].copy_from_slice(&0u32.to_ne_bytes());
        bytes[8..12].copy_from_slice(&5u32.to_ne_bytes());
        let name = RECVMSG_OUT;
        bytes[name..name + 2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        bytes[name + 2..name + 4].copy_from_slice(&4433u16.to_be_bytes());
        bytes[name + 4..name + 8].copy_from_slice(&[127, 0, 0, 1]);
        let payload = RECVMSG_OUT + RECV_NAME + RECV_CONTROL;
        bytes[payload..].copy_from_slice(b"hello");

        let datagrams = receiver.parse(&mut bytes).expect("laid out as armed");
        assert_eq!(datagrams.source, "127.0.0.1:4433".parse().unwrap());
        assert_eq!(datagrams.payload, b"hello");
        assert!(!datagrams.truncated);
        assert_eq!(datagrams.control, RecvControl::default());

        assert!(receiver.parse(&mut bytes[..20]).is_none(), "short");
    }
}
