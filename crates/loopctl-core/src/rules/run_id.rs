//! The one rule for run ids that loopctl creates or accepts: they name folders and files, so
//! they are plain ASCII words. Ids read from foreign logs are kept as written; where such an
//! id must name a file, `file_name` makes it safe.

use std::borrow::Cow;

/// Longest run id accepted (a file name component must stay well under 255 bytes).
pub const MAX_LEN: usize = 128;

/// What the rule allows, as every message states it.
pub const RULE: &str = "use ASCII letters, digits, '-', '_' or '.', starting with a letter or digit, at most 128 characters";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run id {id:?} is not valid: {RULE}")]
pub struct InvalidRunId {
    pub id: String,
}

/// Whether `id` may name a run loopctl creates: ASCII letters, digits, `-`, `_` and `.`,
/// starting with a letter or digit (so never `-x`, `.`, `..` or a hidden file), at most
/// `MAX_LEN` bytes.
pub fn check(id: &str) -> Result<(), InvalidRunId> {
    let b = id.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= MAX_LEN
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(InvalidRunId { id: id.to_string() })
    }
}

/// `id` as a file name component: itself when it passes `check`, else its allowed characters
/// followed by a fingerprint of the whole id (so two ids never share a name).
pub fn file_name(id: &str) -> Cow<'_, str> {
    if check(id).is_ok() {
        return Cow::Borrowed(id);
    }
    let kept: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    let kept = kept.trim_start_matches(['-', '_', '.']);
    let fp = crate::fold::run_state::fingerprint(id.as_bytes());
    let fp = &fp[..fp.len().min(16)];
    Cow::Owned(if kept.is_empty() {
        format!("run-{fp}")
    } else {
        format!("{kept}-{fp}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_ids() {
        for id in [
            "a",
            "fix-the-tests-20260311-090000",
            "run_1.2",
            "9lives",
            "A.b-c_d",
        ] {
            assert_eq!(check(id), Ok(()), "{id}");
        }
        assert!(check(&"x".repeat(MAX_LEN)).is_ok());
    }

    #[test]
    fn refuses_what_the_message_does_not_allow() {
        for id in [
            "",
            ".",
            "..",
            "-rf",
            "--run",
            "_x",
            ".hidden",
            "a/b",
            "a\\b",
            "🚀",
            "ünï",
            "run 🚀 ünï",
            "a b",
            "a\0b",
            "tab\there",
        ] {
            let e = check(id).unwrap_err();
            assert!(e.to_string().contains(RULE), "{e}");
        }
        assert!(check(&"x".repeat(MAX_LEN + 1)).is_err());
    }

    #[test]
    fn file_names_are_valid_and_distinct() {
        assert_eq!(file_name("ok-1"), "ok-1");
        let a = file_name("a/b");
        let b = file_name("a\\b");
        assert_ne!(a, b);
        for n in [
            a,
            b,
            file_name("🚀"),
            file_name("../x"),
            file_name(&"é".repeat(300)),
        ] {
            assert!(check(&n).is_ok(), "{n}");
        }
    }
}
