//! What a reader heard of a publisher's numbered messages or frames: the soak's way to
//! tell a message that came late from one that never came.

use std::collections::BTreeSet;

/// What one reader heard of one publisher's numbered messages.
#[derive(Debug)]
pub(crate) struct Heard {
    /// The highest number.
    pub(crate) last: u64,
    /// Numbers below it not heard (yet).
    pub(crate) missing: BTreeSet<u64>,
}

impl Heard {
    /// Starting at the first number heard.
    pub(crate) fn new(first: u64) -> Self {
        Self {
            last: first,
            missing: BTreeSet::new(),
        }
    }

    /// Notes a number: one past `last + 1` leaves a gap, one in a gap fills it.
    pub(crate) fn hear(&mut self, number: u64) {
        if number > self.last {
            self.missing.extend(self.last + 1..number);
            self.last = number;
        } else {
            self.missing.remove(&number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Heard;

    #[test]
    fn a_number_arriving_after_a_later_one_is_late_not_lost() {
        let mut heard = Heard::new(1);
        heard.hear(2);
        heard.hear(5);
        assert_eq!(heard.missing.iter().copied().collect::<Vec<_>>(), [3, 4]);
        heard.hear(4);
        heard.hear(6);
        assert_eq!(heard.missing.iter().copied().collect::<Vec<_>>(), [3]);
        assert_eq!(heard.last, 6);
    }
}
