//! Runs found by id: once per event in every log. A merged log's map holds tens of thousands
//! of runs, so a lookup is mostly cache misses; the id is kept in the map's own slot, not
//! behind a pointer, and hashed by its ends.

use std::hash::{Hash, Hasher};

/// Hashes a run id by its length and its first and last eight bytes: one event in every log
/// looks its run up, and ids share most of their bytes (`<alias>-<stamp>-<number>`), telling
/// apart at their ends.
#[derive(Default)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, b: &[u8]) {
        let word = |w: Option<&[u8; 8]>| w.map_or(0, |w| u64::from_le_bytes(*w));
        let (first, last) = match b.len() {
            8.. => (word(b.first_chunk()), word(b.last_chunk())),
            n => (b.iter().fold(0, |h, c| h << 8 | u64::from(*c)), n as u64),
        };
        for w in [first, last, b.len() as u64] {
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A run id as a key of a log's runs: held in place when it is short (stamped ids are some
/// 35 bytes), so that telling it apart from another reads no other memory.
#[derive(Debug, Clone)]
pub(super) enum RunKey {
    Short(u8, [u8; SHORT]),
    Long(Box<[u8]>),
}

/// The longest id held in place (the key is then 48 bytes).
const SHORT: usize = 46;

impl RunKey {
    fn bytes(&self) -> &[u8] {
        match self {
            RunKey::Short(n, b) => &b[..usize::from(*n)],
            RunKey::Long(b) => b,
        }
    }
}

/// A run id looked up as a `RunKey`, without making one.
pub(super) struct IdRef<'a>(pub(super) &'a str);

impl Hash for IdRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.0.as_bytes());
    }
}

impl Hash for RunKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.bytes());
    }
}

impl hashbrown::Equivalent<RunKey> for IdRef<'_> {
    fn equivalent(&self, k: &RunKey) -> bool {
        self.0.as_bytes() == k.bytes()
    }
}

impl PartialEq for RunKey {
    fn eq(&self, o: &RunKey) -> bool {
        self.bytes() == o.bytes()
    }
}

impl Eq for RunKey {}

impl From<&IdRef<'_>> for RunKey {
    fn from(id: &IdRef<'_>) -> RunKey {
        let b = id.0.as_bytes();
        match b.len() {
            n @ 0..=SHORT => {
                let mut short = [0; SHORT];
                short[..n].copy_from_slice(b);
                RunKey::Short(n as u8, short)
            }
            _ => RunKey::Long(b.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn ids_short_and_long_are_found_by_their_text() {
        let hash = std::hash::BuildHasherDefault::<IdHasher>::default();
        for id in [
            "",
            "a",
            "0123456789abcdef",
            "0123456789abcdefg",
            &"r".repeat(32),
            &"r".repeat(33),
            &"r".repeat(SHORT),
            &"r".repeat(SHORT + 1),
            "billing-20260101-000001",
        ] {
            let key = RunKey::from(&IdRef(id));
            assert_eq!(key.bytes(), id.as_bytes());
            assert_eq!(hash.hash_one(&key), hash.hash_one(IdRef(id)), "{id:?}");
            assert!(hashbrown::Equivalent::equivalent(&IdRef(id), &key));
            let other = format!("{id}x");
            assert!(!hashbrown::Equivalent::equivalent(&IdRef(&other), &key));
            // One byte changed anywhere: another id.
            for at in 0..id.len() {
                let mut b = id.as_bytes().to_vec();
                b[at] ^= 1;
                let other = String::from_utf8_lossy(&b).into_owned();
                if other != id {
                    assert!(
                        !hashbrown::Equivalent::equivalent(&IdRef(&other), &key),
                        "{other:?}"
                    );
                }
            }
        }
    }
}
