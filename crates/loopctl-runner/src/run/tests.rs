//! Attempt bookkeeping on constructed inputs: sessions, run ids, prompt placement.

use loopctl_core::rules::loop_file::PhaseKind;

use super::*;

fn pos(index: usize, iteration: u64) -> Pos {
    Pos {
        kind: PhaseKind::Loop,
        index,
        iteration,
    }
}

#[test]
fn each_attempt_has_its_own_session_and_a_resume_finds_the_same_one() {
    let first = session_id("fix-1", &pos(0, 1), 1);
    assert_eq!(first, session_id("fix-1", &pos(0, 1), 1));
    assert!(
        first.starts_with("ses_") && first.len() == 4 + 12,
        "{first}"
    );
    let others = [
        session_id("fix-1", &pos(0, 1), 2),
        session_id("fix-1", &pos(1, 1), 1),
        session_id("fix-1", &pos(0, 2), 1),
        session_id("fix-2", &pos(0, 1), 1),
        session_id(
            "fix-1",
            &Pos {
                kind: PhaseKind::Pre,
                ..pos(0, 1)
            },
            1,
        ),
    ];
    for o in &others {
        assert_ne!(&first, o);
    }
}

#[test]
fn a_run_id_must_name_one_folder() {
    // The one rule (rules::run_id): it also refuses what starts with '-' or '.', and non-ASCII.
    for bad in [
        "",
        ".",
        "..",
        "a/b",
        "a\\b",
        "a\0b",
        "..x",
        "-rf",
        "run 🚀 ünï",
    ] {
        assert!(check_run_id(bad).is_err(), "{bad:?} accepted");
    }
    for good in ["fix-20260101-120000", "a.b_c", "x..y"] {
        assert!(check_run_id(good).is_ok(), "{good:?} refused");
    }
    assert_eq!(safe_name("fix the tests/2", '_'), "fix_the_tests_2");
    assert_eq!(safe_name("ünï", '-'), "-n-");
}

#[test]
fn the_prompt_replaces_its_placeholder_or_goes_in_on_stdin() {
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (out, stdin) = place_prompt(&argv(&["claude", "-p", "{prompt}"]), "fix it".into());
    assert_eq!((out, stdin), (argv(&["claude", "-p", "fix it"]), None));
    let (out, stdin) = place_prompt(&argv(&["agent", "--msg={prompt}!"]), "go".into());
    assert_eq!((out, stdin), (argv(&["agent", "--msg=go!"]), None));
    let (out, stdin) = place_prompt(&argv(&["codex", "exec"]), "fix it".into());
    assert_eq!(
        (out, stdin.as_deref()),
        (argv(&["codex", "exec"]), Some("fix it"))
    );
}

#[test]
fn a_prompt_file_is_relative_to_the_loop_file() {
    let lf = Path::new("/loops/fix/loop.json");
    assert_eq!(
        prompt_path(Some(lf), "prompts/plan.md"),
        Path::new("/loops/fix/prompts/plan.md")
    );
    assert_eq!(prompt_path(Some(lf), "/abs/p.md"), Path::new("/abs/p.md"));
    assert_eq!(prompt_path(None, "p.md"), Path::new("p.md"));
}
