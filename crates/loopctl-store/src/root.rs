//! Whether a root exists, and what its not existing means.

use std::path::Path;

use crate::{Result, StoreError};

/// Whether the root exists. The default root (not named by `--root` or `$LOOPCTL_ROOT`) not
/// existing only means nothing was run here yet: false, and every command over the root takes
/// it as a root that holds no run (empty output, exit 0). A root the user named must exist: an
/// error (docs/cli.md, "The root").
pub fn root_exists(root: &Path, named: bool) -> Result<bool> {
    // A dangling symlink is no root either.
    match std::fs::metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match named {
            false => Ok(false),
            true => Err(StoreError::NotFound(format!(
                "no root folder {}: it does not exist",
                root.display()
            ))),
        },
        _ => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_root_is_an_error_only_when_named() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope");
        assert!(!root_exists(&missing, false).unwrap());
        assert!(root_exists(tmp.path(), true).unwrap());
        let e = root_exists(&missing, true).unwrap_err().to_string();
        assert!(e.contains("no root folder") && e.contains("nope"), "{e}");
    }
}
