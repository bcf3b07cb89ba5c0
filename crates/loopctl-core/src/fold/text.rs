//! Text compares the folds make on every event.

/// `a == b` for the short names folds compare on every event (phases, steps): a word or two
/// compared in place, not a call to `memcmp` per compare.
#[inline(always)]
pub fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // The first and the last bytes of a word's width, overlapping: together every byte of a
    // text up to twice that long, two loads each.
    let u32s = |s: &[u8]| {
        let (h, t) = (s.first_chunk::<4>(), s.last_chunk::<4>());
        h.zip(t)
            .map(|(h, t)| (u32::from_le_bytes(*h), u32::from_le_bytes(*t)))
    };
    let u64s = |s: &[u8]| {
        let (h, t) = (s.first_chunk::<8>(), s.last_chunk::<8>());
        h.zip(t)
            .map(|(h, t)| (u64::from_le_bytes(*h), u64::from_le_bytes(*t)))
    };
    match n {
        0 => true,
        // The first, middle and last bytes are all of them.
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=8 => u32s(a) == u32s(b),
        9..=16 => u64s(a) == u64s(b),
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
