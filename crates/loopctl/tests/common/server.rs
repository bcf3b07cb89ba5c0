//! A `loopctl serve` child for the end-to-end tests: started on a free loopback port, its
//! stderr collected, asked over real HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

/// A `loopctl serve` child; killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub stderr: Receiver<String>,
    /// What it printed on stderr up to its address.
    pub early: Vec<String>,
}

impl Server {
    pub fn start(args: &[&Path], extra: &[&str]) -> Server {
        Server::start_on("127.0.0.1:0", args, extra)
    }

    /// `start`, listening on `listen`.
    pub fn start_on(listen: &str, args: &[&Path], extra: &[&str]) -> Server {
        Server::spawn(Command::new(cargo_bin("loopctl")), listen, args, extra)
    }

    /// `start`, in folder `dir` (its default root is `dir/.loopctl`).
    pub fn start_in(dir: &Path, args: &[&Path], extra: &[&str]) -> Server {
        let mut cmd = Command::new(cargo_bin("loopctl"));
        cmd.current_dir(dir).env_remove("LOOPCTL_ROOT");
        Server::spawn(cmd, "127.0.0.1:0", args, extra)
    }

    /// `start` under an open-file limit of `nofile` (soft and hard: it cannot be raised).
    pub fn start_limited(nofile: u64, args: &[&Path], extra: &[&str]) -> Server {
        Server::spawn(limited(nofile), "127.0.0.1:0", args, extra)
    }

    fn spawn(mut cmd: Command, listen: &str, args: &[&Path], extra: &[&str]) -> Server {
        let mut child = cmd
            .env("NO_COLOR", "1")
            .arg("serve")
            .args(["--listen", listen, "--poll", "50ms", "--rescan", "100ms"])
            .args(extra)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut addr = String::new();
        let mut early = Vec::new();
        while addr.is_empty() {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .expect("serve printed its address");
            if let Some(rest) = line.split("http://").nth(1) {
                addr = rest.split_whitespace().next().unwrap_or("").to_string();
            }
            early.push(line);
        }
        let s = Server {
            child,
            addr,
            stderr: rx,
            early,
        };
        s.wait_until(|s| s.get("/healthz").0 == 200, "the first replay");
        s
    }

    pub fn request(&self, raw: &[u8]) -> (u16, String, String) {
        let mut c = TcpStream::connect(&self.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(raw).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let code = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (code, head.to_string(), body.to_string())
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        let (code, _, body) =
            self.request(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        (code, body)
    }

    pub fn metrics(&self) -> String {
        let (code, body) = self.get("/metrics");
        assert_eq!(code, 200, "{body}");
        body
    }

    /// Polls until `ok` (the follower works on its own clock), failing after a generous wait.
    pub fn wait_until(&self, ok: impl Fn(&Server) -> bool, what: &str) {
        let start = Instant::now();
        while !ok(self) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn notices(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

/// `loopctl` run by `sh` under an open-file limit of `nofile`, soft and hard.
pub fn limited(nofile: u64) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("ulimit -n {nofile} && exec \"$0\" \"$@\"")])
        .arg(cargo_bin("loopctl"));
    cmd
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
