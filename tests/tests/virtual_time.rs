//! The conformance scenarios in `moqx_net`'s virtual-time test runtime: in-memory links,
//! no sockets, milliseconds per scenario.

use std::time::Duration;

use moq_conformance::{Harness, Task, conformance_tests};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{self, Session, SessionConfig};

struct VirtualTime {
    runtime: TestRuntime,
}

impl VirtualTime {
    /// Seeded from `MOQ_TEST_SEED`, or 1.
    fn new() -> Self {
        let seed = std::env::var("MOQ_TEST_SEED")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(1);
        Self {
            runtime: TestRuntime::new(seed, std::time::Instant::now()),
        }
    }
}

impl Harness for VirtualTime {
    fn connect(&mut self, server: SessionConfig, client: SessionConfig) -> (Session, Session) {
        // As a driver negotiates: the client offers its version, the server accepts all.
        let link = {
            let mut link_config = LinkConfig::default();
            link_config.protocol = Some(client.version.alpn().to_owned());
            link_config
        };
        let (client_end, server_end) = self.runtime.connect(link);
        let server = server.with_version(client.version);
        let server = session::accept(self.runtime.clone(), server_end, server);
        let client = session::connect(self.runtime.clone(), client_end, client);
        (client, server)
    }

    fn send_errors(&self) -> u64 {
        0 // the virtual link is not UDP
    }

    fn run_until(&mut self, patience: Duration, done: &mut dyn FnMut() -> bool) -> bool {
        self.runtime.run_until(patience, done)
    }

    fn spawn(&mut self, task: Task) {
        self.runtime.spawn_task(task);
    }
}

conformance_tests!(VirtualTime::new());

mod across_versions {
    use super::VirtualTime;

    moq_conformance::cross_version_tests!(VirtualTime::new());
}

mod moq_transport {
    use super::VirtualTime;

    moq_conformance::moq_transport_version_tests!(VirtualTime::new());
}
