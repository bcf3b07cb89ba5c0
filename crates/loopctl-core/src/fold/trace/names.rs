//! A run's names (phases, steps, quality phases), each held once and numbered in the order
//! first seen: two of a run's names are equal when they are the same `Arc`, or the same id.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::records::Name;
use crate::fold::text::same_text;

/// How many names are found by a scan (a run has a handful) before a hash takes over.
const FEW: usize = 32;

#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Every name, by id.
    all: Vec<Name>,
    /// Of the first `FEW` names, `key` of each: a scan compares these, and the text only of
    /// the one that matches.
    keys: Vec<u64>,
    /// The names past the first `FEW`, by text.
    more: FxHashMap<Name, u32>,
    /// The id given last, and per id the other id asked for right after it the last time
    /// (`NONE` before): a run's steps come round in the same order, so the name asked for is
    /// most often one of these two, and found by comparing one or two texts, not by a scan.
    last: u32,
    next: Vec<u32>,
}

const NONE: u32 = u32::MAX;

/// The same names (the guesses are no part of what a run's names are).
impl PartialEq for Names {
    fn eq(&self, other: &Names) -> bool {
        self.all == other.all
    }
}

/// A name's first bytes and length in one word: names whose words differ differ (equal words
/// say nothing: the texts are compared then).
#[inline(always)]
fn key(name: &[u8]) -> u64 {
    let head = match name.first_chunk::<8>() {
        Some(h) => u64::from_le_bytes(*h),
        None => name.iter().rev().fold(0, |w, &c| (w << 8) | u64::from(c)),
    };
    head ^ (name.len() as u64).rotate_right(8)
}

impl Names {
    /// The id of `name`, added if new.
    pub fn id(&mut self, name: &str) -> u32 {
        let last = self.last as usize;
        if self.all.get(last).is_some_and(|n| same_text(n, name)) {
            return self.last;
        }
        let guess = self.next.get(last).copied().unwrap_or(NONE);
        if self
            .all
            .get(guess as usize)
            .is_some_and(|n| same_text(n, name))
        {
            self.last = guess;
            return guess;
        }
        let id = self.find(name);
        if let Some(next) = self.next.get_mut(last) {
            *next = id;
        }
        self.last = id;
        id
    }

    /// The id of `name`, added if new, without a guess.
    fn find(&mut self, name: &str) -> u32 {
        let k = key(name.as_bytes());
        let few = self.keys.iter().enumerate();
        for (id, _) in few.filter(|(_, key)| **key == k) {
            if same_text(&self.all[id], name) {
                return id as u32;
            }
        }
        if let Some(id) = self.more.get(name) {
            return *id;
        }
        let id = self.all.len() as u32;
        let n: Name = Arc::from(name);
        if self.keys.len() < FEW {
            self.keys.push(k);
        } else {
            self.more.insert(n.clone(), id);
        }
        self.all.push(n);
        self.next.push(NONE);
        id
    }

    /// The name with id `id` (one `id` gave).
    pub(super) fn get(&self, id: u32) -> &Name {
        &self.all[id as usize]
    }

    /// The name with id `id`, if `id` gave it.
    pub fn name(&self, id: u32) -> Option<&Name> {
        self.all.get(id as usize)
    }

    /// `name`, shared, and its id.
    pub(super) fn intern(&mut self, name: &str) -> (Name, u32) {
        let id = self.id(name);
        (self.get(id).clone(), id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_has_one_id_and_one_copy() {
        let mut names = Names::default();
        // More than `FEW`, names that share their first bytes or length, and the empty one.
        let texts: Vec<String> = (0..80)
            .map(|i| match i % 4 {
                0 => format!("STEP_{i}"),
                1 => format!("PREPARE_CHECKS_{i}"),
                2 => "x".repeat(i),
                _ => format!("{i}"),
            })
            .collect();
        let ids: Vec<u32> = texts.iter().map(|t| names.id(t)).collect();
        for (t, id) in texts.iter().zip(&ids) {
            assert_eq!(names.id(t), *id, "{t}");
            assert_eq!(&**names.get(*id), t.as_str());
            let (a, a_id) = names.intern(t);
            let (b, _) = names.intern(t);
            assert!(Arc::ptr_eq(&a, &b), "{t}");
            assert_eq!(a_id, *id);
        }
        let mut distinct = texts.clone();
        distinct.sort();
        distinct.dedup();
        let mut unique_ids = ids.clone();
        unique_ids.sort();
        unique_ids.dedup();
        assert_eq!(unique_ids.len(), distinct.len());
        assert_eq!(names.all.len(), distinct.len());
    }

    /// Names asked for in rounds whose order changes (so the guesses miss as well as hit),
    /// repeated, and new names among them: each keeps its first id.
    #[test]
    fn guessed_names_are_the_names_asked_for() {
        let mut names = Names::default();
        let pool = [
            "PLAN",
            "GENERATE",
            "GENERATE",
            "A",
            "PREPARE_CHECKS",
            "EVALUATE",
            "B",
        ];
        let mut first: Vec<(String, u32)> = Vec::new();
        let mut x = 7u32;
        for round in 0..40 {
            for i in 0..pool.len() {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let t = if (x >> 16).is_multiple_of(5) {
                    format!("{}{}", pool[i], round % 3)
                } else {
                    pool[(i + round / 7) % pool.len()].to_string()
                };
                let id = names.id(&t);
                assert_eq!(&**names.get(id), t.as_str());
                match first.iter().find(|(f, _)| *f == t) {
                    Some((_, was)) => assert_eq!(id, *was, "{t}"),
                    None => first.push((t, id)),
                }
            }
        }
        assert_eq!(names.all.len(), first.len());
    }
}
