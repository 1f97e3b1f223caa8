//! What the relay needs of a socket driver, and the drivers it can run on.
//!
//! The relay's policy (who may connect, with which rights, how many) is the same on every
//! driver; a driver only has to bind the port, yield each client whose handshakes
//! completed as a [`Request`] to accept or refuse, and shut down. [`Listener`] is that
//! contract; `[server] driver` (`--driver`) picks the implementation.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use moq_net::runtime::Runtime;
use moq_runtime::binding::BindingSession;
use moq_runtime::endpoint::EndpointCounters;
use moq_runtime::server::{Request, ServerConfig};

use crate::config::{Driver, ServerSection};

/// A bound server of some driver.
pub trait Listener: Send + 'static {
    /// The runtime its sessions run on.
    type Runtime: Runtime<Transport = BindingSession>;

    /// The UDP address both bindings listen on.
    fn local_addr(&self) -> SocketAddr;

    /// Each worker's endpoint counters, in worker order, for `/metrics`.
    fn counters(&self) -> Vec<Arc<EndpointCounters>>;

    /// The next client whose handshakes completed; `None` once the driver stopped.
    fn accept(&mut self) -> impl Future<Output = Option<Request<Self::Runtime>>> + Send;

    /// Stops accepting and waits for the driver's workers to end (each once its last
    /// connection closed).
    fn shutdown(self) -> impl Future<Output = ()> + Send;
}

impl Listener for moq_tokio::Server {
    type Runtime = moq_tokio::TokioRuntime;

    fn local_addr(&self) -> SocketAddr {
        moq_tokio::Server::local_addr(self)
    }

    fn counters(&self) -> Vec<Arc<EndpointCounters>> {
        moq_tokio::Server::counters(self).to_vec()
    }

    fn accept(&mut self) -> impl Future<Output = Option<moq_tokio::Request>> + Send {
        moq_tokio::Server::accept(self)
    }

    fn shutdown(self) -> impl Future<Output = ()> + Send {
        moq_tokio::Server::shutdown(self)
    }
}

/// Binds `config` on the driver `server` names.
pub async fn bind(
    server: &ServerSection,
    config: ServerConfig,
) -> Result<moq_tokio::Server, moq_tokio::Error> {
    match server.driver {
        Driver::Tokio => moq_tokio::Server::bind(config).await,
        Driver::TokioPerCore => {
            moq_tokio::Server::bind_per_core(config, server.worker_count()).await
        }
    }
}
