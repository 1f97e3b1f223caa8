//! A network namespace of a test's own: what only the kernel can do to packets (an
//! interface MTU with Don't Fragment refusals, a rate limit).

/// Moves the calling thread, and the threads it starts after, into a network namespace of
/// its own, with its loopback up and its MTU at `mtu` bytes (IPv4 and IPv6 on it; IPv6
/// needs at least 1,280). A datagram larger than that, sent with Don't Fragment as every
/// QUIC socket here does, is refused by the kernel (`EMSGSIZE`), as a link of that MTU
/// refuses it. Needs root and iproute2.
#[allow(dead_code)] // not every test file uses it
pub(crate) fn loopback_with_mtu(mtu: u32) {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("a network namespace of the test's own (run as root)");
    run("ip", &["link", "set", "lo", "up", "mtu", &mtu.to_string()]);
}

/// Moves the calling thread, and the threads it starts after, into a network namespace of
/// its own whose loopback also holds `address` (a second address on the host, as a VIP or
/// a secondary IP is). Needs root and iproute2.
#[allow(dead_code)] // not every test file uses it
pub(crate) fn loopback_with_address(address: &str) {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("a network namespace of the test's own (run as root)");
    run("ip", &["link", "set", "lo", "up"]);
    run("ip", &["addr", "add", address, "dev", "lo"]);
}

/// Moves the calling thread, and the threads it starts after, into a network namespace of
/// its own whose loopback sends at `rate` through a token bucket (`tc tbf`): egress slower
/// than the offered load, as on a saturated link. Needs root and iproute2.
#[allow(dead_code)] // not every test file uses it
pub(crate) fn loopback_with_rate(rate: &str) {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("a network namespace of the test's own (run as root)");
    run("ip", &["link", "set", "lo", "up"]);
    run(
        "tc",
        &[
            "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate, "burst", "16kb", "latency",
            "400ms",
        ],
    );
}

/// Runs `program` with `args`, failing the test if it does not succeed.
pub(crate) fn run(program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|error| panic!("{program}: {error} (iproute2 installed?)"));
    assert!(status.success(), "{program} {args:?}: {status}");
}
