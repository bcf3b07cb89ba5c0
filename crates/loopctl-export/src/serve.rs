//! `loopctl serve`: every log under the roots replayed once, then followed; `/metrics`
//! encodes the current state (O(series), never a log read).
//!
//! HTTP is served by a small std-only HTTP/1.1 responder rather than tiny_http: tiny_http 0.12
//! reads request heads without a size cap or a timeout, and the issue asks for bounded heads
//! and for slow clients not to stall scrapes. Here each connection gets its own thread, up to
//! `Config::max_connections` at once (503 beyond); a head is capped at `MAX_HEAD` bytes and
//! must arrive within `HEAD_TIMEOUT`; bodies are never read; every response closes its
//! connection. A client trickling its request ties up only its own thread.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loopctl_core::decode::lines::Pos;
use loopctl_core::fold::run_state::RunState;
use loopctl_core::render::run_row::RunRow;
use loopctl_follow::{Follower, Item, Start};
use loopctl_store::clock::now;
use loopctl_store::discover::{self, LOG_NAME, RunRef};
use loopctl_store::read::ReadOptions;
use loopctl_store::snapshot::{pick_folder_run, salvage_max_iterations};

mod http;

use http::{HeadError, read_head, respond, wants_openmetrics};

use crate::encode::{self, OPENMETRICS_CONTENT_TYPE, Shared, TEXT_CONTENT_TYPE};
use crate::feed::{Damage, Feed};
use crate::model::{Metric, MetricState, Options, RunMetrics, SourceId, Val};
use crate::textfile::{ExportError, LogRef, absorb, fold_logs_batched, logs, maybe_logs};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9477";
/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD: usize = 8 << 10;
/// Time a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where `serve` listens: `--listen` as given, and the addresses it names. A host name may
/// name several (`localhost`: 127.0.0.1 and ::1): IPv4 ones first, the first that binds taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    pub text: String,
    pub addrs: Vec<SocketAddr>,
}

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(
        "{0:?} is not HOST:PORT or IP:PORT (such as 127.0.0.1:9477, localhost:9477, [::1]:9477 or 0.0.0.0:9477)"
    )]
    Form(String),
    /// The cause in the message, as `ServeError::Bind`.
    #[error("cannot resolve the host name {host:?}: {cause}")]
    Resolve { host: String, cause: std::io::Error },
}

impl std::str::FromStr for Listen {
    type Err = ListenError;

    /// An IP address and port as they are; a host name and port resolved now.
    fn from_str(text: &str) -> Result<Listen, ListenError> {
        let listen = |addrs| {
            Ok(Listen {
                text: text.to_string(),
                addrs,
            })
        };
        if let Ok(a) = text.parse::<SocketAddr>() {
            return listen(vec![a]);
        }
        let form = || ListenError::Form(text.to_string());
        let (host, port) = text.rsplit_once(':').ok_or_else(form)?;
        let port: u16 = port.parse().map_err(|_| form())?;
        // An IPv6 address goes in brackets, and then parsed above.
        if host.is_empty() || host.contains([':', '[', ']', '/']) {
            return Err(form());
        }
        let resolve = |cause| ListenError::Resolve {
            host: host.to_string(),
            cause,
        };
        let mut addrs: Vec<SocketAddr> = (host, port).to_socket_addrs().map_err(resolve)?.collect();
        if addrs.is_empty() {
            return Err(resolve(std::io::Error::other("no address")));
        }
        addrs.sort_by_key(SocketAddr::is_ipv6);
        listen(addrs)
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: Listen,
    pub roots: Vec<PathBuf>,
    pub options: Options,
    pub max_line: usize,
    /// Threads the start-up replay folds the logs on (`--threads`).
    pub threads: usize,
    /// How often followed logs are checked when no notification arrives.
    pub poll: Duration,
    /// How often the roots are scanned for new run folders.
    pub rescan: Duration,
    /// Connections served at once (each on its own thread); more are answered 503.
    pub max_connections: usize,
    /// Also push the metrics to an OTLP collector (`serve --otlp-metrics`).
    pub otlp_metrics: Option<crate::otel::metrics::Push>,
    /// A root that does not exist yet is served empty, its runs picked up by the rescans once
    /// it appears (the default root before the first run), instead of refused.
    pub missing_roots_wait: bool,
    /// The root in use (`--root`, or the default): `/api/runs` names the resume command of a
    /// run of its folders by name, others by path, as `list` does.
    pub root: PathBuf,
}

/// What the server tells the person running it (the CLI prints it).
pub trait Ui: Send + Sync {
    fn listening(&self, addr: SocketAddr);
    /// Start-up replay progress: paths read of `total` (a root's subfolders, logs or not).
    fn progress(&self, done: usize, total: usize);
    /// The start-up replay is done: `logs` logs read, now followed.
    fn replayed(&self, logs: usize);
    /// A deleted or rewritten log, a new run, a log left unfollowed.
    fn notice(&self, text: &str);
    /// A finding (a damaged line, a seq problem) in `log`, reported once, as every command
    /// reports it.
    fn finding(&self, _log: &Path, text: &str) {
        self.notice(text)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The cause is in the message, not a `source` (the CLI prints the chain: it would say it
    /// twice).
    #[error("cannot listen on {addr}: {cause}")]
    Bind { addr: String, cause: std::io::Error },
    #[error(
        "{logs} logs to follow, but the open-file limit ({limit}, `ulimit -n`) leaves room for \
         {room}: serve keeps one file open per log it follows; raise the limit, or serve fewer \
         roots"
    )]
    OpenFiles { logs: usize, limit: u64, room: u64 },
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// Files `serve` keeps for itself besides one per followed log and one per connection: the
/// listener, the start-up replay's reads, the notifier's, the standard streams.
const SPARE_FILES: u64 = 64;

/// Raises the soft open-file limit to the hard one (`serve` keeps one file open per log it
/// follows) and gives it, with how many logs it leaves room for.
fn open_file_room(max_connections: usize) -> (u64, u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return (u64::MAX, u64::MAX);
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let room = limit.saturating_sub(SPARE_FILES + max_connections as u64);
    (limit, room)
}

/// Sets `flag` on SIGINT and SIGTERM (graceful shutdown).
pub fn shutdown_on_signals(flag: &Arc<AtomicBool>) -> std::io::Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    Ok(())
}

struct Http {
    shared: Shared,
    registry: prometheus::Registry,
    ready: AtomicBool,
    /// Folder (or file) path of each source, for `/api/runs` and the runner probes.
    paths: Arc<Mutex<HashMap<SourceId, PathBuf>>>,
    /// `Config::root`.
    root: PathBuf,
}

/// `file:line: byte N: kind: reason`, as every command reports a finding.
pub fn damage_text(log: &std::path::Path, d: &Damage) -> String {
    let line = if d.line > 0 {
        format!(":{}", d.line)
    } else {
        String::new()
    };
    format!(
        "{}{line}: byte {}: {}: {}",
        log.display(),
        d.offset,
        crate::model::finding_label(d.kind),
        d.reason
    )
}

/// What a server that stopped saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// Findings reported (damaged lines, torn tails, seq problems), at start-up or while
    /// following: `--strict` makes them exit 1 once the server stops.
    pub findings: u64,
}

/// Runs the server until `stop` is set.
pub fn serve(cfg: Config, stop: Arc<AtomicBool>, ui: &dyn Ui) -> Result<Served, ServeError> {
    let present: Vec<PathBuf> = cfg
        .roots
        .iter()
        .filter(|r| !cfg.missing_roots_wait || r.exists())
        .cloned()
        .collect();
    let initial = maybe_logs(&present)?;
    let (limit, room) = open_file_room(cfg.max_connections);
    if initial.len() as u64 > room {
        // Past the limit, neither the logs nor the listener could open a file: refused here
        // rather than a server that stops answering.
        return Err(ServeError::OpenFiles {
            logs: initial.len(),
            limit,
            room,
        });
    }
    let bind_error = |cause| ServeError::Bind {
        addr: cfg.listen.text.clone(),
        cause,
    };
    let listener = TcpListener::bind(&cfg.listen.addrs[..]).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let paths: Arc<Mutex<HashMap<SourceId, PathBuf>>> = Arc::default();
    let probe_paths = Arc::clone(&paths);
    // Asked at each scrape for the logs with running runs only (bounded by the live runs).
    let runner_gone: encode::RunnerGone = Arc::new(move |s| {
        let path = probe_paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&s)
            .cloned();
        path.is_some_and(|p| {
            let log = if p.is_dir() { p.join(LOG_NAME) } else { p };
            crate::textfile::runner_gone(&log)
        })
    });
    let shared = Shared {
        state: Arc::new(Mutex::new(MetricState::new(cfg.options.clone()))),
        scrape_seconds: Some(Arc::new(Mutex::new(encode::ScrapeTimes::default()))),
        runner_gone: Some(runner_gone),
    };
    let http = Arc::new(Http {
        registry: encode::registry(shared.clone()).map_err(ExportError::from)?,
        shared,
        ready: AtomicBool::new(false),
        paths,
        root: cfg.root.clone(),
    });
    ui.listening(addr);
    std::thread::scope(|sc| {
        let stop_accept = Arc::clone(&stop);
        let (http_accept, max) = (Arc::clone(&http), cfg.max_connections.max(1));
        sc.spawn(move || accept(listener, &http_accept, max, &stop_accept));
        if let Some(p) = &cfg.otlp_metrics {
            let (http, stop) = (Arc::clone(&http), Arc::clone(&stop));
            sc.spawn(move || {
                let gather = || http.registry.gather();
                crate::otel::metrics::push_until(p, gather, &stop, |w| ui.notice(w));
            });
        }
        let r = follow(&cfg, initial, room, &http, &stop, ui);
        stop.store(true, Ordering::SeqCst);
        r
    })
}

/// Replays every log once, then follows them and picks up new run folders until `stop`.
fn follow(
    cfg: &Config,
    initial: Vec<LogRef>,
    room: u64,
    http: &Http,
    stop: &AtomicBool,
    ui: &dyn Ui,
) -> Result<Served, ServeError> {
    let mut findings = 0u64;
    let mut follower = Follower::new(cfg.poll);
    // Follower source index -> (log, feed).
    let mut feeds: Vec<Option<(LogRef, Feed)>> = Vec::new();
    let mut known: HashMap<PathBuf, usize> = HashMap::new();
    let lock = || http.shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let total = initial.len();
    let read = ReadOptions {
        max_line: cfg.max_line,
        threads: cfg.threads.max(1),
        ..ReadOptions::default()
    };
    // The logs to follow, from where the replay left them.
    let mut replayed = Vec::with_capacity(initial.len());
    let mut stopped = false;
    // Each batch is absorbed while the next one is folded; folded without the lock (the
    // server answers 503 until the replay is done).
    fold_logs_batched(&initial, &cfg.options, &read, |start, folded| {
        if stop.load(Ordering::SeqCst) {
            stopped = true;
            return false;
        }
        let n = folded.len();
        let mut m = lock();
        for (log, f) in initial[start..].iter().zip(folded) {
            let read = absorb(&mut m, log, f, &mut |d| {
                findings += 1;
                ui.finding(&log.log, &damage_text(&log.log, &d))
            });
            match read {
                Ok(Some((source, feed))) => {
                    track(http, source, log);
                    replayed.push((log, feed));
                }
                // A subfolder without a log: the rescan watches the root for one.
                Ok(None) => {}
                // Deleted between the scan and the read: the next scan decides.
                Err(e) => ui.notice(&format!("{e}; skipped")),
            }
        }
        report_folds(&mut m, ui);
        drop(m);
        ui.progress(start + n, total);
        true
    });
    if stopped {
        return Ok(Served { findings });
    }
    http.ready.store(true, Ordering::SeqCst);
    ui.replayed(replayed.len());
    // The replay is done and scrapes see all of it; the follower is set up now, before the
    // first look at the logs: each is followed from where the replay left it, so a line
    // appended meanwhile is read at the first poll. The folders are watched last: a watch set
    // up before would be told of every file the replay and this opening read.
    for (log, feed) in replayed {
        let at = follower.add_unwatched(&log.log, Start::Numbered(feed.next_offset));
        if !follower.is_open(at) {
            // Deleted since the replay read it: gone, as a log deleted while followed is (the
            // follower would only wait for a file to appear there).
            follower.forget(at);
            lock().drop_source(feed.source);
            lock_paths(http).remove(&feed.source);
            continue;
        }
        known.insert(log.log.clone(), at);
        set(&mut feeds, at, (log.clone(), feed));
    }
    for r in &cfg.roots {
        // A run folder is one log, its subfolders no runs: watched as its log's folder
        // (below), not with every folder under it.
        if r.is_dir() && discover::folder_log(r).is_none() {
            follower.watch(r);
        }
    }
    for log in known.keys() {
        follower.watch_folder_of(log);
    }
    let mut last_scan = Instant::now();
    let mut full_noted = false;
    // Logs seen gone since the last rescan, by the (device, inode) of their file.
    // (device and inode, follower source, feed, path it was followed at)
    let mut moved_away: Vec<((u64, u64), usize, Feed, PathBuf)> = Vec::new();
    // What the follower said of a log it saw go, held until the next rescan tells a deletion
    // from a move (a run folder renamed is said to have moved, not to be deleted).
    let mut gone_notes: HashMap<usize, String> = HashMap::new();
    while !stop.load(Ordering::SeqCst) {
        let mut items = Vec::new();
        follower.poll(&mut |item| items.push(item));
        if !items.is_empty() {
            let mut m = lock();
            let going: Vec<usize> = items
                .iter()
                .filter_map(|i| match i {
                    Item::Gone { source } => Some(*source),
                    _ => None,
                })
                .collect();
            for item in items {
                match item {
                    Item::Line {
                        source,
                        line,
                        offset,
                        text,
                    } => {
                        let Some(Some((log, feed))) = feeds.get_mut(source) else {
                            continue;
                        };
                        let pos = Pos { line, offset };
                        feed.line(&mut m, pos, &text, true, &mut |d| {
                            findings += 1;
                            ui.finding(&log.log, &damage_text(&log.log, &d))
                        });
                    }
                    Item::Restarted { source } => {
                        // Read anew from its start (an emptied log sends no line that would
                        // tell it): its runs go now, and come back as its lines are read.
                        if let Some(Some((_, feed))) = feeds.get_mut(source) {
                            m.reset_source(feed.source);
                            *feed = Feed::new(feed.source, cfg.max_line);
                        }
                    }
                    Item::Notice { source, text } if going.contains(&source) => {
                        gone_notes.insert(source, text);
                    }
                    Item::Notice { text, .. } => ui.notice(&text),
                    Item::Gone { source } => {
                        let Some(Some((log, feed))) = feeds.get_mut(source).map(Option::take)
                        else {
                            if let Some(note) = gone_notes.remove(&source) {
                                ui.notice(&note);
                            }
                            continue;
                        };
                        known.remove(&log.log);
                        // Moved, perhaps (a run folder renamed): the next rescan looks for
                        // the file under another name before the log is dropped.
                        match follower.file_id(source) {
                            Some(id) => moved_away.push((id, source, feed, log.log)),
                            None => {
                                if let Some(note) = gone_notes.remove(&source) {
                                    ui.notice(&note);
                                }
                                m.drop_source(feed.source);
                                lock_paths(http).remove(&feed.source);
                            }
                        }
                    }
                }
            }
            report_folds(&mut m, ui);
        }
        if last_scan.elapsed() >= cfg.rescan {
            last_scan = Instant::now();
            full_noted &= known.len() as u64 >= room;
            // New run folders: followed from their start (their lines arrive as items).
            if let Ok(now) = logs(&cfg.roots) {
                for log in now {
                    if known.contains_key(&log.log) {
                        continue;
                    }
                    // A followed file under a new name (its folder renamed or moved): the same
                    // log, followed on from where it was read, under the same source (and so
                    // the same labels), not counted again.
                    let id = std::fs::metadata(&log.log).ok().map(|m| (m.dev(), m.ino()));
                    // The same inode and the same bytes before the offset read: an inode
                    // number alone may be a deleted log's, reused.
                    let moved = id.and_then(|id| {
                        let same = |i: usize| follower.holds_read(i, &log.log);
                        if let Some(k) = moved_away
                            .iter()
                            .position(|(gone, i, _, _)| *gone == id && same(*i))
                        {
                            let (_, i, feed, from) = moved_away.swap_remove(k);
                            gone_notes.remove(&i);
                            return Some((feed, from));
                        }
                        // Not seen gone yet: the file its old path no longer names.
                        let old = follower.sources_of(id).find(|&i| {
                            same(i)
                                && feeds
                                    .get(i)
                                    .and_then(Option::as_ref)
                                    .is_some_and(|(l, _)| !l.log.exists())
                        })?;
                        follower.forget(old);
                        let (gone, feed) = feeds.get_mut(old).and_then(Option::take)?;
                        known.remove(&gone.log);
                        Some((feed, gone.log))
                    });
                    if let Some((feed, from)) = moved {
                        ui.notice(&format!(
                            "{} moved to {}; followed on",
                            from.display(),
                            log.log.display()
                        ));
                        let at = follower.add(&log.log, Start::Numbered(feed.next_offset));
                        track(http, feed.source, &log);
                        known.insert(log.log.clone(), at);
                        set(&mut feeds, at, (log, feed));
                        continue;
                    }
                    if known.len() as u64 >= room {
                        // Each followed log keeps a file open: past the room the open-file
                        // limit leaves, the server itself could not answer. Said once per
                        // crossing; the next rescans try again.
                        if !full_noted {
                            ui.notice(&format!(
                                "{}: not followed: the open-file limit leaves room for {room} \
                                 logs (raise it with `ulimit -n`); new logs wait until some go",
                                log.log.display()
                            ));
                            full_noted = true;
                        }
                        continue;
                    }
                    let source = lock().add_source(&log.name);
                    let at = follower.add(&log.log, Start::Beginning);
                    track(http, source, &log);
                    known.insert(log.log.clone(), at);
                    set(&mut feeds, at, (log, Feed::new(source, cfg.max_line)));
                }
            }
            // Gone for good: their runs leave the gauges.
            if !moved_away.is_empty() {
                let mut m = lock();
                for (_, i, feed, _) in moved_away.drain(..) {
                    if let Some(note) = gone_notes.remove(&i) {
                        ui.notice(&note);
                    }
                    m.drop_source(feed.source);
                    lock_paths(http).remove(&feed.source);
                }
            }
        }
        follower.wait();
    }
    Ok(Served { findings })
}

/// Loops and phases folded into `other` by the caps, named once.
fn report_folds(m: &mut MetricState, ui: &dyn Ui) {
    for n in m.take_notices() {
        ui.notice(&n);
    }
}

fn lock_paths(http: &Http) -> std::sync::MutexGuard<'_, HashMap<SourceId, PathBuf>> {
    http.paths.lock().unwrap_or_else(|e| e.into_inner())
}

fn track(http: &Http, source: SourceId, log: &LogRef) {
    let path = log.dir.clone().unwrap_or_else(|| log.log.clone());
    lock_paths(http).insert(source, path);
}

fn set<T>(v: &mut Vec<Option<T>>, i: usize, x: T) {
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i] = Some(x);
}

fn accept(listener: TcpListener, http: &Arc<Http>, max: usize, stop: &AtomicBool) {
    // Non-blocking so that shutdown is noticed without a wake-up connection.
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((mut s, _)) => {
                if s.set_nonblocking(false).is_err() {
                    continue;
                }
                if open.fetch_add(1, Ordering::SeqCst) >= max {
                    open.fetch_sub(1, Ordering::SeqCst);
                    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                    let _ = respond(&mut s, 503, "text/plain", b"busy\n", false, &[]);
                    continue;
                }
                let (conn_http, conn_open) = (Arc::clone(http), Arc::clone(&open));
                let spawned = std::thread::Builder::new()
                    .name("loopctl-http".into())
                    .spawn(move || {
                        handle(&mut s, &conn_http);
                        conn_open.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn handle(s: &mut TcpStream, http: &Http) {
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    let head = match read_head(s) {
        Ok(h) => h,
        Err(HeadError::Closed) => return,
        Err(e) => {
            let (code, msg) = match e {
                HeadError::TooLarge => (431, "request head too large\n"),
                HeadError::Timeout => (408, "request head not received in time\n"),
                _ => (400, "malformed request\n"),
            };
            let _ = respond(s, code, "text/plain", msg.as_bytes(), false, &[]);
            return;
        }
    };
    let head_only = head.method == "HEAD";
    let known = matches!(
        head.path.as_str(),
        "/metrics" | "/healthz" | "/api/runs" | "/" | "*"
    );
    if !known {
        let _ = respond(s, 404, "text/plain", b"not found\n", head_only, &[]);
        return;
    }
    if head.method != "GET" && !head_only {
        let _ = respond(
            s,
            405,
            "text/plain",
            b"method not allowed\n",
            false,
            &[("Allow", "GET, HEAD")],
        );
        return;
    }
    let (ty, body): (&str, Vec<u8>) = match head.path.as_str() {
        "/metrics" if !http.ready.load(Ordering::SeqCst) => {
            // Counters restart from the replayed totals, not from a partial replay.
            let _ = respond(s, 503, "text/plain", b"replaying\n", head_only, &[]);
            return;
        }
        "/metrics" => {
            let open = wants_openmetrics(&head.accept);
            let started = Instant::now();
            let families = http.registry.gather();
            let text = if open {
                encode::openmetrics(&families)
            } else {
                encode::text(&families)
            };
            if let Some(d) = &http.shared.scrape_seconds {
                let mut t = d.lock().unwrap_or_else(|e| e.into_inner());
                t.observe(started.elapsed().as_secs_f64());
            }
            let ty = if open {
                OPENMETRICS_CONTENT_TYPE
            } else {
                TEXT_CONTENT_TYPE
            };
            (ty, text.into_bytes())
        }
        "/healthz" => {
            if !http.ready.load(Ordering::SeqCst) {
                let _ = respond(s, 503, "text/plain", b"replaying\n", head_only, &[]);
                return;
            }
            ("text/plain", b"ok\n".to_vec())
        }
        "/api/runs" => ("application/json", runs_json(http)),
        _ => (
            "text/html; charset=utf-8",
            b"<html><body><a href=\"/metrics\">/metrics</a> <a href=\"/api/runs\">/api/runs</a> <a href=\"/healthz\">/healthz</a></body></html>\n".to_vec(),
        ),
    };
    let _ = respond(s, 200, ty, &body, head_only, &[]);
}

/// The rows `list --json` prints (`RunRow`, the same fields and bytes), one per run: a log
/// holding several runs gives several. Liveness is probed here, at request time: it needs the
/// run's lock and the clock, which the metric fold does not read.
fn runs_json(http: &Http) -> Vec<u8> {
    let m = http.shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let paths = lock_paths(http);
    let now = now();
    let mut out = b"[".to_vec();
    // Each log's runs, in run id order (`runs` gives them so); a log with no event has none.
    let runs: Vec<_> = m.runs().collect();
    let by_log: HashMap<SourceId, &[(SourceId, &RunMetrics)]> = runs
        .chunk_by(|a, b| a.0 == b.0)
        .map(|g| (g[0].0, g))
        .collect();
    // In path order, as `list` orders a root's runs (by folder name), whenever a log was found.
    let mut logs: Vec<(&SourceId, &PathBuf)> = paths.iter().collect();
    logs.sort_unstable_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    for (&source, path) in logs {
        let run = if path.is_dir() {
            RunRef::file(&path.join(LOG_NAME))
        } else {
            RunRef::file(path)
        };
        let log_runs = by_log.get(&source).copied().unwrap_or_default();
        // As `list` does: a log with no event is one empty row, and a `max_iterations` the log
        // leaves unset is read from its state file (aif-loop writes it there, not in the log).
        let owned: Vec<RunState> = if log_runs.is_empty() {
            vec![RunState::new(&run.name)]
        } else if log_runs
            .iter()
            .any(|(_, r)| r.state.max_iterations.is_none())
        {
            let mut v: Vec<RunState> = log_runs.iter().map(|(_, r)| r.state.clone()).collect();
            salvage_max_iterations(&run, &mut v.iter_mut().collect::<Vec<_>>());
            v
        } else {
            Vec::new()
        };
        let states: Vec<&RunState> = if owned.is_empty() {
            log_runs.iter().map(|(_, r)| &r.state).collect()
        } else {
            owned.iter().collect()
        };
        // As `list` counts them: each run its own seq findings, and the folder's run the
        // findings that name no run (damaged lines, a torn tail).
        // (`states` are `log_runs`' states, in the same order.)
        let own = |i: usize| log_runs.get(i).map_or(0, |(_, r)| r.findings);
        let attributed: u64 = log_runs.iter().map(|(_, r)| r.findings).sum();
        // A torn tail its writer completed since is no finding of the log as it is now.
        let settled = attributed + m.completed_tails(source);
        let unattributed = source_findings(&m, source).saturating_sub(settled);
        let folder_run = pick_folder_run(states.iter().copied(), &run.name).map(|s| &s.run_id);
        let run_paths = (run.log.as_path(), run.dir.as_deref());
        // A log with no run may be one that cannot be read: `list` says so, and why.
        let error = match log_runs {
            [] => loopctl_store::read::read_error(&run.log),
            _ => None,
        };
        for (i, s) in states.into_iter().enumerate() {
            let findings = own(i)
                + if folder_run == Some(&s.run_id) {
                    unattributed
                } else {
                    0
                };
            let (standing, resume) =
                discover::standing(&http.root, &run, s, now, &Default::default());
            if out.len() > 1 {
                out.push(b',');
            }
            RunRow::of(
                &run.name,
                s,
                findings as usize,
                run_paths,
                error.as_deref(),
                (standing, resume.as_deref()),
            )
            .write_json(&mut out);
        }
    }
    out.extend_from_slice(b"]\n");
    out
}

fn source_findings(m: &MetricState, source: SourceId) -> u64 {
    m.source_series(source)
        .filter(|(m, _)| *m == Metric::LogFindings)
        .map(|(_, v)| match v {
            Val::Count(n) => (*n).max(0) as u64,
            Val::Hist(_) => 0,
        })
        .sum()
}
