//! Counting what each client address holds (HTTP connections, QMux sessions), so that one
//! address cannot take every place.

use std::sync::Arc;

/// Connections per client address. An entry exists only while its address holds a
/// connection, so the table is bounded by the connections held.
#[derive(Debug, Default)]
pub(crate) struct PerAddress {
    counts: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

/// One connection's place in [`PerAddress`], given back when it drops.
pub(crate) struct AddressSlot {
    table: Arc<PerAddress>,
    address: std::net::IpAddr,
}

impl PerAddress {
    /// A place for one more connection from `address`, if it holds fewer than `limit`.
    pub(crate) fn try_take(
        table: &Arc<Self>,
        address: std::net::IpAddr,
        limit: usize,
    ) -> Option<AddressSlot> {
        let mut counts = table.counts.lock().unwrap_or_else(|e| e.into_inner());
        let count = counts.entry(address).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            table: table.clone(),
            address,
        })
    }
}

/// A place for one more session from `peer` within `limit` sessions an address (0: no
/// cap): `Some(None)` when there is no cap, `None` (and a warning naming the limit) when
/// its address holds its share.
pub(crate) fn session_slot(
    table: &Arc<PerAddress>,
    peer: std::net::SocketAddr,
    limit: usize,
) -> Option<Option<AddressSlot>> {
    if limit == 0 {
        return Some(None);
    }
    let slot = PerAddress::try_take(table, peer.ip(), limit);
    if slot.is_none() {
        tracing::warn!(%peer, limit, "refused a QMux client: limits.max_sessions_per_address reached");
    }
    slot.map(Some)
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self.table.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = counts.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}
