//! A kernel that refuses io_uring, or lacks what the driver needs, made real on one
//! thread: a seccomp filter (as container runtimes install) makes the system calls fail
//! there the way such a kernel would, and the probe must name the cause. Seccomp filters
//! are per thread: the rest of the test process keeps its io_uring.

use moqx_runtime::server::ServerConfig;
use moqx_runtime::tls::Certificate;
use moqx_uring::{Error, Feature, ProbeError, Server, UringConfig};

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

/// `offsetof(struct seccomp_data, ...)`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of argument `n` (little-endian).
const fn arg(n: u32) -> u32 {
    16 + 8 * n
}

fn statement(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

const LOAD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const IF_EQUAL: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const IF_ANY_BIT: u32 = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
const RETURN: u32 = libc::BPF_RET | libc::BPF_K;

/// A filter failing `syscall` with `errno` when argument `argument` matches `test`
/// (`None`: always). Everything else is allowed.
fn failing(
    syscall: libc::c_long,
    errno: i32,
    argument: Option<(u32, u32, u32)>,
) -> Vec<libc::sock_filter> {
    let mut program = vec![
        statement(LOAD, ARCH),
        jump(IF_EQUAL, AUDIT_ARCH, 1, 0),
        statement(RETURN, libc::SECCOMP_RET_ALLOW),
        statement(LOAD, NR),
    ];
    match argument {
        None => program.push(jump(IF_EQUAL, syscall as u32, 0, 1)),
        Some((index, test, value)) => {
            program.push(jump(IF_EQUAL, syscall as u32, 0, 3));
            program.push(statement(LOAD, arg(index)));
            program.push(jump(test, value, 0, 1));
        }
    }
    program.push(statement(RETURN, libc::SECCOMP_RET_ERRNO | errno as u32));
    program.push(statement(RETURN, libc::SECCOMP_RET_ALLOW));
    program
}

/// Runs `test` on a thread of its own under `filter`.
fn filtered<T: Send>(filter: Vec<libc::sock_filter>, test: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let program = libc::sock_fprog {
                    len: filter.len() as u16,
                    filter: filter.as_ptr().cast_mut(),
                };
                // SAFETY: plain prctl and seccomp calls with valid arguments: `program`
                // points at `filter`, alive for the calls; the filter only returns
                // ALLOW or ERRNO, and binds only this thread (no TSYNC flag).
                unsafe {
                    assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
                    assert_eq!(
                        libc::syscall(
                            libc::SYS_seccomp,
                            libc::SECCOMP_SET_MODE_FILTER,
                            0,
                            &program as *const libc::sock_fprog
                        ),
                        0,
                        "installing the filter: {}",
                        std::io::Error::last_os_error()
                    );
                }
                test()
            })
            .join()
            .expect("the filtered thread")
    })
}

fn server_config() -> ServerConfig {
    ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        Default::default(),
    )
}

#[test]
fn a_refused_io_uring_is_named_and_no_worker_starts() {
    // What container runtimes' default seccomp profiles do (EPERM).
    let filter = failing(libc::SYS_io_uring_setup, libc::EPERM, None);
    let (probed, bound) = filtered(filter, || {
        let probed = moqx_uring::probe();
        let bound = Server::bind(server_config(), 1, UringConfig::default(), |_| async {});
        (probed, bound.map(|server| server.local_addr()))
    });
    let error = probed.expect_err("io_uring_setup fails");
    assert!(matches!(error, ProbeError::Refused(_)), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("io_uring is refused here"), "{message}");
    assert!(message.contains("Operation not permitted"), "{message}");
    assert!(message.contains("seccomp"), "{message}");
    match bound {
        Err(Error::Probe(ProbeError::Refused(_))) => {}
        other => panic!("the server must refuse to start with the probe's error: {other:?}"),
    }
}

#[test]
fn a_kernel_without_buffer_rings_is_named() {
    // io_uring_register(fd, IORING_REGISTER_PBUF_RING = 22, ...) fails as before 5.19.
    let filter = failing(
        libc::SYS_io_uring_register,
        libc::EINVAL,
        Some((1, IF_EQUAL, 22)),
    );
    let error = filtered(filter, moqx_uring::probe).expect_err("no buffer rings");
    match &error {
        ProbeError::Missing { missing, .. } => {
            assert!(missing.contains(&Feature::BufferRing), "{missing:?}")
        }
        other => panic!("{other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("provided-buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19)"),
        "{message}"
    );
    assert!(message.contains("needs Linux 6.12 or later"), "{message}");
}

#[test]
fn a_kernel_without_absolute_timeouts_is_named() {
    // io_uring_enter(fd, _, _, flags with IORING_ENTER_ABS_TIMER = 1 << 5, ...) fails as
    // before 6.12.
    let filter = failing(
        libc::SYS_io_uring_enter,
        libc::EINVAL,
        Some((3, IF_ANY_BIT, 1 << 5)),
    );
    let error = filtered(filter, moqx_uring::probe).expect_err("no absolute timeouts");
    let message = error.to_string();
    assert!(
        message.contains("waits until an absolute time (IORING_ENTER_ABS_TIMER, Linux 6.12)"),
        "{message}"
    );
}

#[test]
fn this_kernel_passes_and_a_server_starts() {
    let capabilities = moqx_uring::probe().unwrap_or_else(|error| panic!("{error}"));
    assert!(!capabilities.release.is_empty());
    let server = Server::bind(server_config(), 2, UringConfig::default(), |_| async {})
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(server.workers(), 2);
    let address = server.local_addr();
    assert_ne!(address.port(), 0);
    // A server with no connections ends when stopped, and its workers' sockets go with it:
    // the port is free again (a plain bind conflicts with any socket left on it).
    server.join();
    std::net::UdpSocket::bind(address).expect("the workers released the port");
}
