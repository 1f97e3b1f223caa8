//! What moqx-uring needs of the kernel, tried for real before a worker starts.
//!
//! The probe does not trust version numbers (distribution kernels backport, containers
//! filter): it builds a ring with the workers' flags, registers a provided-buffer ring,
//! arms a multishot `recvmsg` and receives a datagram through it, waits on a futex and
//! waits with an absolute timeout. What fails is named, with the Linux release that brought
//! it; a ring refused outright (a seccomp profile, as container runtimes install by
//! default, or the `kernel.io_uring_disabled` sysctl) says so. Nothing here panics.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{IoUring, cqueue, opcode};

use crate::buffers::{BufferRing, Consumption};
use crate::recv::{MAX_RECEIVE, Receiver};
use crate::ring::{self, Clock};

/// A kernel capability the driver uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Feature {
    /// `IORING_SETUP_SINGLE_ISSUER` (Linux 6.0).
    SingleIssuer,
    /// `IORING_SETUP_DEFER_TASKRUN` (Linux 6.1).
    DeferTaskrun,
    /// `IORING_SETUP_COOP_TASKRUN` (Linux 5.19).
    CoopTaskrun,
    /// Waits with a timeout argument, `IORING_FEAT_EXT_ARG` (Linux 5.11).
    ExtendedArguments,
    /// Waits until an absolute time, `IORING_ENTER_ABS_TIMER` (Linux 6.12).
    AbsoluteTimeout,
    /// `IORING_OP_SENDMSG` (Linux 5.3).
    Sendmsg,
    /// `IORING_OP_ASYNC_CANCEL` (Linux 5.5).
    Cancel,
    /// Provided-buffer rings, `IORING_REGISTER_PBUF_RING` (Linux 5.19).
    BufferRing,
    /// Buffers consumed incrementally, `IOU_PBUF_RING_INC` (Linux 6.12).
    IncrementalBuffers,
    /// Multishot `recvmsg` with provided buffers (Linux 6.0).
    MultishotRecvmsg,
    /// `IORING_OP_FUTEX_WAIT` (Linux 6.7).
    FutexWait,
}

/// Why io_uring cannot serve here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The kernel refused to make a ring at all.
    #[error(
        "io_uring is refused here: io_uring_setup failed ({0}); a seccomp profile (container \
         runtimes block io_uring by default) or the kernel.io_uring_disabled sysctl forbids it. \
         Allow io_uring, or run the tokio driver"
    )]
    Refused(#[source] io::Error),
    /// The kernel lacks capabilities the driver needs.
    #[error(
        "Linux {release} lacks what moqx-uring needs: {}. moqx-uring needs Linux 6.12 or later; \
         run the tokio driver on this kernel",
        list(missing)
    )]
    Missing {
        /// The running kernel's release (`uname -r`).
        release: String,
        /// What it lacks.
        missing: Vec<Feature>,
    },
    /// A probe step failed for a reason other than a missing capability.
    #[error("probing io_uring failed while {step}: {source}")]
    Failed {
        /// What the probe was doing.
        step: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// What the probe found: how the driver will use this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// The running kernel's release.
    pub release: String,
    /// Whether receive buffers are consumed incrementally (with a `min_left` that keeps
    /// every datagram whole); if not, each receive takes a whole buffer.
    pub incremental_buffers: bool,
}

impl Capabilities {
    pub(crate) fn consumption(&self) -> Consumption {
        if self.incremental_buffers {
            Consumption::Incremental {
                min_left: MAX_RECEIVE as u32,
            }
        } else {
            Consumption::Whole
        }
    }
}

/// Tries everything the driver uses, on the calling thread.
pub fn probe() -> Result<Capabilities, ProbeError> {
    let release = release();
    IoUring::new(8).map_err(ProbeError::Refused)?;
    let mut missing = Vec::new();
    let Some(mut ring) = setup_flags(&mut missing) else {
        return Err(ProbeError::Missing { release, missing });
    };
    if !ring.params().is_feature_ext_arg() {
        missing.push(Feature::ExtendedArguments);
    }
    let mut opcodes = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut opcodes)
        .map_err(failed("reading the supported operations"))?;
    for (code, feature) in [
        (opcode::SendMsg::CODE, Feature::Sendmsg),
        (opcode::AsyncCancel::CODE, Feature::Cancel),
        (opcode::FutexWait::CODE, Feature::FutexWait),
        (opcode::RecvMsg::CODE, Feature::MultishotRecvmsg),
    ] {
        if !opcodes.is_supported(code) {
            missing.push(feature);
        }
    }
    if !missing.is_empty() {
        return Err(ProbeError::Missing { release, missing });
    }
    let clock = Clock::new();
    if let Err(error) = ring::submit_and_wait(&ring, Some(Instant::now()), &clock) {
        if error.raw_os_error() == Some(libc::EINVAL) {
            missing.push(Feature::AbsoluteTimeout);
        } else {
            return Err(failed("waiting with an absolute timeout")(error));
        }
    }
    if let Err(error) = futex_wait(&mut ring) {
        if matches!(error.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) {
            missing.push(Feature::FutexWait);
        } else {
            return Err(failed("waiting on a futex")(error));
        }
    }
    let incremental_buffers = match buffer_ring(&mut ring, &mut missing) {
        Some((buffers, incremental)) => {
            receive(&mut ring, buffers, &mut missing)?;
            incremental
        }
        None => false,
    };
    if !missing.is_empty() {
        return Err(ProbeError::Missing { release, missing });
    }
    Ok(Capabilities {
        release,
        incremental_buffers,
    })
}

/// The workers' ring; on `EINVAL`, which of its flags the kernel does not know.
fn setup_flags(missing: &mut Vec<Feature>) -> Option<IoUring> {
    match ring::build(8) {
        Ok(ring) => Some(ring),
        Err(_) => {
            let mut builder =
                IoUring::<io_uring::squeue::Entry, io_uring::cqueue::Entry>::builder();
            if builder.setup_single_issuer().build(8).is_err() {
                missing.push(Feature::SingleIssuer);
            } else if builder.setup_defer_taskrun().build(8).is_err() {
                missing.push(Feature::DeferTaskrun);
            }
            if IoUring::<io_uring::squeue::Entry, io_uring::cqueue::Entry>::builder()
                .setup_coop_taskrun()
                .build(8)
                .is_err()
            {
                missing.push(Feature::CoopTaskrun);
            }
            if missing.is_empty() {
                missing.push(Feature::CoopTaskrun);
            }
            None
        }
    }
}

/// A futex wait whose word no longer holds the expected value completes at once with
/// `EAGAIN`: the operation exists and works.
fn futex_wait(ring: &mut IoUring) -> io::Result<()> {
    let word = 1u32;
    let wait = opcode::FutexWait::new(
        &word,
        0,
        FUTEX_BITSET_MATCH_ANY,
        FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
    )
    .build()
    .user_data(1);
    ring::push(ring, &wait)?;
    let result = complete(ring, 1)?;
    match result {
        r if r == -libc::EAGAIN => Ok(()),
        r if r < 0 => Err(io::Error::from_raw_os_error(-r)),
        _ => Ok(()),
    }
}

/// A buffer ring, incremental with `min_left` if the kernel takes it (and whether it is),
/// whole buffers if not. `None` (and what is missing) if no buffer ring registers.
fn buffer_ring(ring: &mut IoUring, missing: &mut Vec<Feature>) -> Option<(BufferRing, bool)> {
    let size = 2 * MAX_RECEIVE as u32;
    let incremental = Consumption::Incremental {
        min_left: MAX_RECEIVE as u32,
    };
    let mut buffers = BufferRing::new(0, 2, size, incremental).ok()?;
    if buffers.register(ring).is_ok() {
        return Some((buffers, true));
    }
    let mut buffers = BufferRing::new(0, 2, size, Consumption::Whole).ok()?;
    if buffers.register(ring).is_err() {
        missing.push(Feature::BufferRing);
        return None;
    }
    // No `min_left` (a field added after 6.12, and backported): whole buffers, since an
    // incremental one would cut datagrams at its tail. Incremental buffers themselves must
    // still be there, as the mark of a 6.12 kernel.
    let mut plain = BufferRing::new(1, 2, size, Consumption::Incremental { min_left: 0 }).ok()?;
    match plain.register(ring) {
        Ok(()) => {
            let _ = plain.unregister(ring);
        }
        Err(_) => missing.push(Feature::IncrementalBuffers),
    }
    Some((buffers, false))
}

/// Arms a multishot receive, sends it a datagram, and sees it arrive with the receive
/// still armed; then cancels it and takes the buffers back.
fn receive(
    ring: &mut IoUring,
    mut buffers: BufferRing,
    missing: &mut Vec<Feature>,
) -> Result<(), ProbeError> {
    let receiver_socket =
        UdpSocket::bind("127.0.0.1:0").map_err(failed("binding a loopback socket"))?;
    let sender = UdpSocket::bind("127.0.0.1:0").map_err(failed("binding a loopback socket"))?;
    let receiver = Receiver::new();
    let arm = receiver.arm(receiver_socket.as_raw_fd(), buffers.group(), 2);
    ring::push(ring, &arm).map_err(failed("arming a receive"))?;
    ring.submit().map_err(failed("arming a receive"))?;
    let address = receiver_socket
        .local_addr()
        .map_err(failed("reading a socket's address"))?;
    sender
        .send_to(b"probe", address)
        .map_err(failed("sending to a loopback socket"))?;
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut outcome = None;
    while outcome.is_none() && Instant::now() < deadline {
        ring::submit_and_wait_for(ring, STEP).map_err(failed("receiving"))?;
        for entry in ring.completion() {
            if entry.user_data() == 2 {
                outcome = Some((entry.result(), entry.flags()));
            }
        }
    }
    let armed = match outcome {
        Some((result, flags)) if result >= 0 && cqueue::more(flags) => {
            if let Some(buffer) = cqueue::buffer_select(flags) {
                let received = buffers.received(buffer, result as u32, flags);
                let payload = received.and_then(|received| {
                    receiver
                        .parse(buffers.bytes(&received))
                        .map(|d| d.payload.to_vec())
                });
                if payload.as_deref() != Some(b"probe".as_slice()) {
                    missing.push(Feature::MultishotRecvmsg);
                }
            }
            true
        }
        Some((result, _)) if result == -libc::EINVAL => {
            missing.push(Feature::MultishotRecvmsg);
            false
        }
        Some((result, _)) if result < 0 => {
            return Err(failed("receiving")(io::Error::from_raw_os_error(-result)));
        }
        Some(_) => {
            missing.push(Feature::MultishotRecvmsg);
            false
        }
        None => {
            return Err(failed("receiving")(io::Error::from(
                io::ErrorKind::TimedOut,
            )));
        }
    };
    if armed {
        let cancel = opcode::AsyncCancel::new(2).build().user_data(3);
        ring::push(ring, &cancel).map_err(failed("cancelling a receive"))?;
        let mut ended = false;
        let deadline = Instant::now() + Duration::from_secs(2);
        while !ended && Instant::now() < deadline {
            ring::submit_and_wait_for(ring, STEP).map_err(failed("cancelling a receive"))?;
            for entry in ring.completion() {
                if entry.user_data() == 2 && !cqueue::more(entry.flags()) {
                    ended = true;
                }
            }
        }
        if !ended {
            // `buffers` stays registered and is leaked by its drop: the kernel may still
            // write to it.
            return Err(failed("cancelling a receive")(io::Error::from(
                io::ErrorKind::TimedOut,
            )));
        }
    }
    buffers
        .unregister(ring)
        .map_err(failed("unregistering buffers"))?;
    Ok(())
}

/// Submits and waits for the completion tagged `user_data`; returns its result.
fn complete(ring: &mut IoUring, user_data: u64) -> io::Result<i32> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        ring::submit_and_wait_for(ring, STEP)?;
        if let Some(entry) = ring
            .completion()
            .find(|entry| entry.user_data() == user_data)
        {
            return Ok(entry.result());
        }
    }
    Err(io::Error::from(io::ErrorKind::TimedOut))
}

/// How long one wait of the probe lasts at most (it waits for loopback and for the
/// kernel, never for a peer).
const STEP: Duration = Duration::from_millis(100);

/// `FUTEX2_SIZE_U32`: a 32-bit futex word (futex2 flags, as the ring's futex operations take).
pub(crate) const FUTEX2_SIZE_U32: u32 = 0x02;
/// `FUTEX2_PRIVATE`: the word is private to the process, as `FUTEX_WAKE_PRIVATE` wakes.
pub(crate) const FUTEX2_PRIVATE: u32 = 128;
/// Wake on any bitset (a wait's mask must not be 0).
pub(crate) const FUTEX_BITSET_MATCH_ANY: u64 = u32::MAX as u64;

/// The running kernel's release, as `uname -r` prints it.
fn release() -> String {
    // SAFETY: all-zero is a valid utsname; uname fills it with NUL-terminated strings.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is valid and writable.
    if unsafe { libc::uname(&mut name) } != 0 {
        return "(unknown)".to_owned();
    }
    let bytes: Vec<u8> = name
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn failed(step: &'static str) -> impl Fn(io::Error) -> ProbeError {
    move |source| ProbeError::Failed { step, source }
}

fn list(missing: &[Feature]) -> String {
    missing
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::SingleIssuer => "single-issuer rings (IORING_SETUP_SINGLE_ISSUER, Linux 6.0)",
            Self::DeferTaskrun => "deferred task running (IORING_SETUP_DEFER_TASKRUN, Linux 6.1)",
            Self::CoopTaskrun => "cooperative task running (IORING_SETUP_COOP_TASKRUN, Linux 5.19)",
            Self::ExtendedArguments => "waits with a timeout (IORING_FEAT_EXT_ARG, Linux 5.11)",
            Self::AbsoluteTimeout => {
                "waits until an absolute time (IORING_ENTER_ABS_TIMER, Linux 6.12)"
            }
            Self::Sendmsg => "sendmsg (IORING_OP_SENDMSG, Linux 5.3)",
            Self::Cancel => "cancellation (IORING_OP_ASYNC_CANCEL, Linux 5.5)",
            Self::BufferRing => "provided-buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19)",
            Self::IncrementalBuffers => {
                "incrementally consumed buffers (IOU_PBUF_RING_INC, Linux 6.12)"
            }
            Self::MultishotRecvmsg => "multishot recvmsg (IORING_RECV_MULTISHOT, Linux 6.0)",
            Self::FutexWait => "futex waits (IORING_OP_FUTEX_WAIT, Linux 6.7)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_feature_is_named_with_its_release() {
        let error = ProbeError::Missing {
            release: "6.1.0".into(),
            missing: vec![Feature::FutexWait, Feature::AbsoluteTimeout],
        };
        let message = error.to_string();
        assert!(message.contains("Linux 6.1.0 lacks"), "{message}");
        assert!(
            message.contains("IORING_OP_FUTEX_WAIT, Linux 6.7"),
            "{message}"
        );
        assert!(
            message.contains("IORING_ENTER_ABS_TIMER, Linux 6.12"),
            "{message}"
        );
        assert!(message.contains("tokio driver"), "{message}");
    }
}
