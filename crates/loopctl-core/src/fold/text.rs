//! Text compares the folds make on every event.

/// `a == b` for the short names folds compare on every event (phases, steps): a word or two
/// compared in place, not a call to `memcmp` per compare.
#[inline(always)]
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    // Up to eight bytes as one number, the first byte lowest.
    let word = |s: &[u8]| s.iter().rev().fold(0u64, |w, &c| (w << 8) | u64::from(c));
    match (a.split_first_chunk::<8>(), b.split_first_chunk::<8>()) {
        _ if a.len() <= 8 => word(a) == word(b),
        (Some((ha, ta)), Some((hb, tb))) if a.len() <= 16 => {
            u64::from_le_bytes(*ha) == u64::from_le_bytes(*hb) && word(ta) == word(tb)
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        /// Equal texts, texts that differ in one byte (anywhere: the head word, the tail, past
        /// sixteen bytes) and unrelated ones.
        #[test]
        fn same_text_is_equality(
            a in "[ab\u{e9}]{0,24}",
            other in "[ab\u{e9}]{0,24}",
            at in 0usize..64,
            how in 0u8..3,
        ) {
            let b = match how {
                0 => a.clone(),
                1 if !a.is_empty() => {
                    let mut bytes = a.clone().into_bytes();
                    let i = at % bytes.len();
                    // ASCII stays ASCII, and a byte of a two-byte character stays one.
                    bytes[i] = match bytes[i] {
                        b'a' => b'b',
                        b'b' => b'a',
                        0xc3 => 0xc3,
                        c => c ^ 1,
                    };
                    String::from_utf8(bytes).unwrap_or_default()
                }
                _ => other,
            };
            proptest::prop_assert_eq!(super::same_text(&a, &b), a == b);
        }
    }
}
