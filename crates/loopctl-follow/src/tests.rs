//! The follower against real files: appends, cuts, rewrites, moves, deletions.

use super::*;
use std::io::Write;

fn lines(f: &mut Follower) -> Vec<String> {
    let mut out = vec![];
    f.poll(&mut |it| match it {
        Item::Line { text, .. } => out.push(String::from_utf8_lossy(&text).into_owned()),
        Item::Notice { text, .. } => {
            out.push(format!("! {}", text.split(' ').nth(2).unwrap_or("")))
        }
        Item::Gone { .. } => out.push("gone".into()),
        Item::Restarted { .. } => out.push("restarted".into()),
    });
    out
}

/// A file gone before it was added is not open, and once forgotten, a file appearing at
/// its path later is not read for it (`serve` takes such a log as deleted).
#[test]
fn a_forgotten_source_reads_nothing_that_appears_later() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.jsonl");
    let mut f = Follower::without_notifications(Duration::from_millis(10));
    let missing = f.add_unwatched(&p, Start::Numbered(5));
    assert!(!f.is_open(missing));
    f.forget(missing);
    std::fs::write(&p, b"new\n").unwrap();
    assert!(lines(&mut f).is_empty());
    assert!(!f.is_open(missing));
    let present = f.add_unwatched(&p, Start::Beginning);
    assert!(f.is_open(present));
    assert_eq!(lines(&mut f), ["new"]);
}

/// A followed file moved elsewhere holds what was read (by its bytes before the offset,
/// also once it is seen gone); another file with the same length does not.
#[test]
fn a_moved_file_is_told_by_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let (p, q, r) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    std::fs::write(&p, b"one\ntwo\n").unwrap();
    let mut f = Follower::without_notifications(Duration::from_millis(10));
    let i = f.add_unwatched(&p, Start::Beginning);
    assert_eq!(lines(&mut f), ["one", "two"]);
    let id = f.file_id(i).unwrap();
    std::fs::rename(&p, &q).unwrap();
    std::fs::write(&r, b"uno\ndos\n").unwrap();
    assert!(f.holds_read(i, &q));
    assert!(!f.holds_read(i, &r));
    assert_eq!(f.sources_of(id).collect::<Vec<_>>(), [i]);
    assert_eq!(lines(&mut f), ["! deleted", "gone"]);
    assert!(f.holds_read(i, &q), "still told once gone");
    assert_eq!(f.sources_of(id).count(), 0);
}

#[test]
fn a_line_split_at_every_byte_comes_out_whole_once() {
    let line = b"{\"event\":\"phase_started\",\"x\":\"\xc3\xa9\"}\n";
    for cut in 0..line.len() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.jsonl");
        std::fs::write(&p, b"").unwrap();
        let mut f = Follower::new(Duration::from_millis(10));
        f.add(&p, Start::Beginning);
        let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        w.write_all(&line[..cut]).unwrap();
        let mut got = lines(&mut f);
        w.write_all(&line[cut..]).unwrap();
        got.extend(lines(&mut f));
        assert_eq!(
            got,
            [String::from_utf8_lossy(&line[..line.len() - 1])],
            "cut at {cut}"
        );
    }
}

#[test]
fn a_file_added_unwatched_is_followed_from_its_offset_and_watched_later() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run-1");
    std::fs::create_dir(&run).unwrap();
    let p = run.join("h.jsonl");
    std::fs::write(&p, b"old\n").unwrap();
    let mut f = Follower::new(Duration::from_millis(10));
    f.add_unwatched(&p, Start::At(4));
    assert!(f.watched.is_empty(), "{:?}", f.watched);
    // Appended before the folder is watched: read all the same, at the first poll.
    let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
    w.write_all(b"new\n").unwrap();
    f.watch(dir.path());
    f.watch_folder_of(&p);
    if f.watcher.is_some() {
        assert_eq!(f.watched.iter().collect::<Vec<_>>(), [dir.path()]);
    }
    assert_eq!(lines(&mut f), ["new"]);
}

/// A log named as a file: its folder is watched without the folders under it (a log in a
/// home folder set a watch on each of thousands of folders), and a line appended to it
/// still wakes the follower.
#[test]
fn a_log_folder_is_watched_without_its_subfolders() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        std::fs::create_dir_all(dir.path().join(format!("sub-{i}/deeper"))).unwrap();
    }
    let p = dir.path().join("h.jsonl");
    std::fs::write(&p, b"").unwrap();
    let mut f = Follower::new(Duration::from_secs(30));
    f.add(&p, Start::Beginning);
    if f.watcher.is_none() {
        eprintln!("notice: no file notifications here; the watch is not checked");
        return;
    }
    assert!(f.watched.is_empty(), "{:?}", f.watched);
    assert_eq!(f.flat.iter().collect::<Vec<_>>(), [dir.path()]);
    // A root holding that folder is watched recursively; the log's folder then needs no
    // watch of its own.
    let mut g = Follower::new(Duration::from_secs(30));
    g.watch(dir.path());
    g.add(&dir.path().join("sub-0/h.jsonl"), Start::Beginning);
    assert!(g.flat.is_empty(), "{:?}", g.flat);
    // The append is notified (not found by a poll).
    std::fs::write(&p, b"new\n").unwrap();
    let woken = f.wake.recv_timeout(Duration::from_secs(20));
    assert!(woken.is_ok(), "{woken:?}");
    assert_eq!(lines(&mut f), ["new"]);
}

/// An unfinished last line cut or rewritten by its writer (a torn line repaired, as
/// `resume` does), and the log written on: followed on from that line's start, no whole
/// line given twice; however long the unfinished line, and whether the follower looks
/// between the cut and the writes or after both.
#[test]
fn an_unfinished_line_rewritten_by_its_writer_is_read_afresh_not_the_whole_log() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.jsonl");
    let long = format!("{{\"{}", "x".repeat(200));
    for torn in ["{\"par", long.as_str()] {
        for look_between in [false, true] {
            std::fs::write(&p, format!("a\nb\n{torn}")).unwrap();
            let mut f = Follower::new(Duration::from_millis(10));
            f.add(&p, Start::Beginning);
            assert_eq!(lines(&mut f), ["a", "b"]);
            let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            file.set_len(4).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            let mut got = Vec::new();
            if look_between {
                got.extend(lines(&mut f));
            }
            let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
            w.write_all(b"{\"whole\":1}\nc\n").unwrap();
            got.extend(lines(&mut f));
            assert_eq!(
                got,
                ["! unfinished", "{\"whole\":1}", "c"],
                "{torn:.8} {look_between}"
            );
        }
    }
    // Cut into a line already given: from the start, as before.
    std::fs::write(&p, "a\nb\n").unwrap();
    let mut f = Follower::new(Duration::from_millis(10));
    f.add(&p, Start::Beginning);
    assert_eq!(lines(&mut f), ["a", "b"]);
    let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    file.set_len(2).unwrap();
    assert_eq!(lines(&mut f), ["! truncated", "restarted", "a"]);
}

#[test]
fn truncation_replacement_and_deletion_are_noticed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.jsonl");
    std::fs::write(&p, "a\nb\n").unwrap();
    let mut f = Follower::new(Duration::from_millis(10));
    f.add(&p, Start::Beginning);
    assert_eq!(lines(&mut f), ["a", "b"]);
    std::fs::write(&p, "c\n").unwrap(); // truncate + rewrite, same inode
    assert_eq!(lines(&mut f), ["! truncated", "restarted", "c"]);
    // Rewritten in place to the same size between two looks: no shrink to see, but its
    // modification time moves (after a clock tick: file times are coarse).
    std::thread::sleep(Duration::from_millis(30));
    std::fs::write(&p, "x\n").unwrap();
    assert_eq!(lines(&mut f), ["! rewritten", "restarted", "x"]);
    // Rewritten in place to the same size, its last bytes kept (a name changed on every line
    // but the last ones): the first bytes tell.
    let tail = "z".repeat(100);
    let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
    w.write_all(format!("{tail}\n").as_bytes()).unwrap();
    assert_eq!(lines(&mut f), [tail.as_str()]);
    std::thread::sleep(Duration::from_millis(30));
    std::fs::write(&p, format!("w\n{tail}\n")).unwrap();
    assert_eq!(
        lines(&mut f),
        ["! rewritten", "restarted", "w", tail.as_str()]
    );
    // Appends are not rewrites.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(b"y\n")
        .unwrap();
    assert_eq!(lines(&mut f), ["y"]);
    let q = dir.path().join("new");
    std::fs::write(&q, "d\ne\n").unwrap();
    std::fs::rename(&q, &p).unwrap();
    assert_eq!(lines(&mut f), ["! replaced;", "restarted", "d", "e"]);
    // Replaced by a copy of what was read and more (an editor's save): followed on.
    std::fs::write(&q, "d\ne\nf\n").unwrap();
    std::fs::rename(&q, &p).unwrap();
    assert_eq!(lines(&mut f), ["! replaced", "f"]);
    // Emptied: no line follows, the restart alone says that what was read is void.
    std::fs::write(&p, "").unwrap();
    assert_eq!(lines(&mut f), ["! truncated", "restarted"]);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(lines(&mut f), ["! deleted", "gone"]);
    assert_eq!(f.live_sources(), 0);
}

#[test]
fn lines_after_a_numbered_start_keep_their_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.jsonl");
    std::fs::write(&p, "a\n\nb\n").unwrap();
    let mut f = Follower::without_notifications(Duration::from_millis(10));
    let numbered = f.add(&p, Start::Numbered(5));
    let unnumbered = f.add(&p, Start::At(5));
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(b"c\nd\n")
        .unwrap();
    let mut got = vec![];
    f.poll(&mut |it| {
        if let Item::Line { source, line, .. } = it {
            got.push((source, line));
        }
    });
    got.sort();
    assert_eq!(
        got,
        [
            (numbered, 4),
            (numbered, 5),
            (unnumbered, 0),
            (unnumbered, 0)
        ]
    );
}

/// This process's descriptors open on a file under `dir` (deleted ones included).
fn fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

#[test]
fn deleted_and_renamed_logs_leave_no_file_open() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let mut f = Follower::without_notifications(Duration::from_millis(10));
    for i in 0..5 {
        let run = dir.join(format!("r{i}"));
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("h.jsonl"), "a\n").unwrap();
        f.add(&run.join("h.jsonl"), Start::Beginning);
    }
    lines(&mut f);
    assert_eq!(fds_under(&dir), 5);
    for i in 0..4 {
        std::fs::remove_dir_all(dir.join(format!("r{i}"))).unwrap();
    }
    // A renamed folder: its log is gone from the path followed, though not deleted.
    std::fs::rename(dir.join("r4"), dir.join("moved")).unwrap();
    assert_eq!(lines(&mut f).iter().filter(|l| *l == "gone").count(), 5);
    assert_eq!(f.live_sources(), 0);
    assert_eq!(fds_under(&dir), 0);
}

#[test]
fn tail_offset_reads_back_only_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.jsonl");
    let mut text = String::new();
    for i in 0..100_000 {
        text.push_str(&format!("{{\"n\":{i}}}\n"));
    }
    text.push_str("{\"torn");
    std::fs::write(&p, &text).unwrap();
    let off = tail_offset(&p, 3, |_| true).unwrap() as usize;
    assert_eq!(
        &text[off..],
        "{\"n\":99997}\n{\"n\":99998}\n{\"n\":99999}\n{\"torn"
    );
    let even = tail_offset(&p, 2, |l| l.ends_with(b"0}")).unwrap() as usize;
    assert!(
        text[even..].starts_with("{\"n\":99980}\n"),
        "{}",
        &text[even..even + 20]
    );
    assert_eq!(tail_offset(&p, 1_000_000, |_| true).unwrap(), 0);
    std::fs::write(&p, "no newline").unwrap();
    assert_eq!(tail_offset(&p, 1, |_| true).unwrap(), 0);
}
