//! The driver ablation matrix: one offered load against the relay on every driver, with
//! GSO, GRO and receive batching each on and off (receive batching only where a driver
//! has the choice: the tokio drivers' `recvmmsg`; io_uring's multishot receive has no
//! batch size), each configuration a fresh relay process measured for CPU per delivery
//! and for its I/O ([`crate::io`]).

/// One configuration of the relay's driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configuration {
    /// `tokio`, `tokio-per-core` or `uring`.
    pub driver: String,
    /// UDP GSO on sends.
    pub gso: bool,
    /// UDP GRO on receives.
    pub gro: bool,
    /// Receive batching (`recvmmsg` of up to 32); `None` where the driver has no such
    /// choice.
    pub recv_batching: Option<bool>,
}

impl Configuration {
    /// Every configuration of `drivers`: GSO × GRO, × receive batching for tokio's.
    pub fn matrix(drivers: &[String]) -> Vec<Self> {
        let mut all = Vec::new();
        for driver in drivers {
            let batching: &[Option<bool>] = if driver == "uring" {
                &[None]
            } else {
                &[Some(true), Some(false)]
            };
            for gso in [true, false] {
                for gro in [true, false] {
                    for &recv_batching in batching {
                        all.push(Self {
                            driver: driver.clone(),
                            gso,
                            gro,
                            recv_batching,
                        });
                    }
                }
            }
        }
        all
    }

    /// A short name: `uring gso+ gro-`, `tokio gso+ gro+ batch-`.
    pub fn label(&self) -> String {
        let sign = |on: bool| if on { '+' } else { '-' };
        let mut label = format!(
            "{} gso{} gro{}",
            self.driver,
            sign(self.gso),
            sign(self.gro)
        );
        if let Some(batching) = self.recv_batching {
            label.push_str(&format!(" batch{}", sign(batching)));
        }
        label
    }

    /// The relay command template for this configuration: `relay` (the moqx-relay binary)
    /// with `workers` workers (thread-per-core drivers), serving `/metrics` for the
    /// driver's counters.
    pub fn template(&self, relay: &str, workers: usize) -> String {
        let mut command = format!(
            "{relay} --bind 127.0.0.1:{{port}} --http-bind 127.0.0.1:{{http_port}} --fingerprint-file {{fingerprint_file}} --max-sessions 100000 --max-subscriptions 100000 --driver {} --workers {workers}",
            self.driver
        );
        if !self.gso {
            command.push_str(" --no-gso");
        }
        if !self.gro {
            command.push_str(" --no-gro");
        }
        if self.recv_batching == Some(false) {
            command.push_str(" --recv-batch 1");
        }
        command
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_switches_batching_only_where_a_driver_has_it() {
        let matrix = Configuration::matrix(&["tokio".into(), "uring".into()]);
        assert_eq!(matrix.len(), 8 + 4);
        let uring: Vec<_> = matrix.iter().filter(|c| c.driver == "uring").collect();
        assert!(uring.iter().all(|c| c.recv_batching.is_none()));
        let off = Configuration {
            driver: "tokio-per-core".into(),
            gso: false,
            gro: true,
            recv_batching: Some(false),
        };
        assert_eq!(off.label(), "tokio-per-core gso- gro+ batch-");
        let template = off.template("moqx-relay", 2);
        assert!(template.contains("--no-gso"), "{template}");
        assert!(!template.contains("--no-gro"), "{template}");
        assert!(template.contains("--recv-batch 1"), "{template}");
        assert!(template.contains("{http_port}"), "{template}");
    }
}
