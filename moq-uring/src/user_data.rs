//! What each completion is for: the tag every submission carries in its `user_data`.

/// The operation a completion belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UserData {
    /// A port's multishot receive.
    Recv { port: u32 },
    /// One `sendmsg` of a port's batch in `slot`.
    Send { port: u32, slot: u32 },
    /// The worker's futex wait.
    Futex,
    /// A cancellation (its own completion says nothing the target's does not).
    Cancel,
}

const RECV: u64 = 1;
const SEND: u64 = 2;
const FUTEX: u64 = 3;
const CANCEL: u64 = 4;

impl From<UserData> for u64 {
    fn from(data: UserData) -> u64 {
        match data {
            UserData::Recv { port } => RECV << 56 | u64::from(port),
            UserData::Send { port, slot } => {
                SEND << 56 | u64::from(port & 0xff_ffff) << 32 | u64::from(slot)
            }
            UserData::Futex => FUTEX << 56,
            UserData::Cancel => CANCEL << 56,
        }
    }
}

impl UserData {
    /// Reads a completion's tag; `None` for one the worker never made.
    pub(crate) fn parse(raw: u64) -> Option<Self> {
        match raw >> 56 {
            RECV => Some(Self::Recv { port: raw as u32 }),
            SEND => Some(Self::Send {
                port: (raw >> 32) as u32 & 0xff_ffff,
                slot: raw as u32,
            }),
            FUTEX => Some(Self::Futex),
            CANCEL => Some(Self::Cancel),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_read_back() {
        for data in [
            UserData::Recv { port: 7 },
            UserData::Send {
                port: 0xab_cdef,
                slot: u32::MAX,
            },
            UserData::Futex,
            UserData::Cancel,
        ] {
            assert_eq!(UserData::parse(data.into()), Some(data));
        }
        assert_eq!(UserData::parse(0), None);
    }
}
