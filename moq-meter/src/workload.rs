//! The loads the meter offers the relay: who publishes, who reads whom, and what one
//! message is.

use crate::members::Role;

/// A load: its members' roles and its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    /// Rooms of `room` members; each member publishes `size`-byte messages, one frame
    /// per group, and reads every other member of its room. Members take turns: one
    /// message at a time, as a chat at a low rate per member sees them.
    Chat {
        /// Members in all.
        members: usize,
        /// Members per room.
        room: usize,
        /// Bytes per message.
        size: usize,
    },
    /// One publisher of `size`-byte messages, one frame per group, read by `subscribers`.
    Fanout {
        /// Readers of the one track.
        subscribers: usize,
        /// Bytes per message.
        size: usize,
    },
    /// One publisher of `size`-byte frames, `group_frames` to a group (a video track's
    /// group of pictures), read by `subscribers`; one frame is one message.
    Media {
        /// Readers of the one track.
        subscribers: usize,
        /// Bytes per frame.
        size: usize,
        /// Frames per group.
        group_frames: u64,
    },
}

impl Workload {
    /// Its name and shape, for a report.
    pub fn describe(&self) -> String {
        match self {
            Self::Chat {
                members,
                room,
                size,
            } => format!("chat: {members} members in rooms of {room}, {size} B per message"),
            Self::Fanout { subscribers, size } => {
                format!("fanout: 1 → {subscribers}, {size} B per message")
            }
            Self::Media {
                subscribers,
                size,
                group_frames,
            } => format!("media: 1 → {subscribers}, {size} B frames, {group_frames} per group"),
        }
    }

    /// Whether it is well formed; else what is wrong, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        match *self {
            Self::Chat { members, room, .. } => {
                if room < 2 {
                    return Err(format!("room: {room} members cannot chat (2 at least)"));
                }
                if members < room || !members.is_multiple_of(room) {
                    return Err(format!(
                        "members: {members} is not a whole number of rooms of {room}"
                    ));
                }
            }
            Self::Fanout { subscribers, .. } | Self::Media { subscribers, .. } => {
                if subscribers == 0 {
                    return Err("subscribers: 0 (1 at least)".to_owned());
                }
            }
        }
        if let Self::Media {
            group_frames: 0, ..
        } = self
        {
            return Err("group_frames: 0 (1 at least)".to_owned());
        }
        Ok(())
    }

    /// Every member's role, in order.
    pub fn roles(&self) -> Vec<Role> {
        match *self {
            Self::Chat { members, room, .. } => (0..members)
                .map(|member| {
                    let first = member / room * room;
                    Role {
                        publishes: Some(chat_path(first / room, member)),
                        prefix: format!("room{}", first / room),
                        reads: (first..first + room)
                            .filter(|&other| other != member)
                            .map(|other| chat_path(first / room, other))
                            .collect(),
                    }
                })
                .collect(),
            Self::Fanout { subscribers, .. } | Self::Media { subscribers, .. } => {
                std::iter::once(Role {
                    publishes: Some(SOURCE.to_owned()),
                    prefix: SOURCE.to_owned(),
                    reads: Vec::new(),
                })
                .chain((0..subscribers).map(|_| Role {
                    publishes: None,
                    prefix: SOURCE.to_owned(),
                    reads: vec![SOURCE.to_owned()],
                }))
                .collect()
            }
        }
    }

    /// The member that publishes message `message` (counted from 0).
    pub fn publisher(&self, message: u64) -> usize {
        match *self {
            Self::Chat { members, .. } => (message % members as u64) as usize,
            Self::Fanout { .. } | Self::Media { .. } => 0,
        }
    }

    /// How many frames the relay delivers for one message.
    pub fn deliveries_per_message(&self) -> u64 {
        match *self {
            Self::Chat { room, .. } => room as u64 - 1,
            Self::Fanout { subscribers, .. } | Self::Media { subscribers, .. } => {
                subscribers as u64
            }
        }
    }

    /// Bytes per message.
    pub fn size(&self) -> usize {
        match *self {
            Self::Chat { size, .. } | Self::Fanout { size, .. } | Self::Media { size, .. } => size,
        }
    }

    /// How message `message` of its publisher is written: whether it starts a group, and
    /// whether it ends one.
    pub fn framing(&self, message: u64) -> (bool, bool) {
        match *self {
            Self::Chat { .. } | Self::Fanout { .. } => (true, true),
            Self::Media { group_frames, .. } => (
                message.is_multiple_of(group_frames),
                message % group_frames == group_frames - 1,
            ),
        }
    }
}

/// The one broadcast of fanout and media.
const SOURCE: &str = "source";

/// Where member `member` of room `room` publishes.
fn chat_path(room: usize, member: usize) -> String {
    format!("room{room}/member{member}")
}
