//! A real `redis-server` per test: on 127.0.0.1 at a free port, no persistence, its own
//! temporary directory, killed on drop. Tests that need one call [`RedisServer::start`]; when
//! `redis-server` is not installed they skip with a loud message, except under CI (`CI` set),
//! where they fail: `.ci/run` installs it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
}

fn installed() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl RedisServer {
    /// A fresh server, or `None` (after a loud message) when redis-server is not installed
    /// outside CI.
    pub fn start(test: &str) -> Option<Self> {
        if !installed() {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "redis-server is not installed: .ci/run must install it (apt-get install redis-server)"
                );
            }
            eprintln!(
                "\n*** SKIPPED {test}: redis-server is not installed (apt-get install redis-server) ***\n"
            );
            return None;
        }
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("berth-redis-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for _ in 0..20 {
            // a port the kernel just handed out; another process may take it before redis
            // binds it, in which case redis exits and we try another
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut server = Self {
                child: None,
                port,
                dir: dir.clone(),
            };
            if server.spawn() {
                return Some(server);
            }
        }
        panic!("could not start redis-server on a free loopback port");
    }

    /// Starts redis-server on `self.port`; true once it answers PING.
    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        for _ in 0..200 {
            if self.ping() {
                return true;
            }
            if let Some(c) = self.child.as_mut()
                && c.try_wait().ok().flatten().is_some()
            {
                self.child = None;
                return false;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        self.kill();
        false
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): every pin it held is gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts a new, empty server on the same port.
    pub fn restart(&mut self) {
        self.kill();
        for _ in 0..40 {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not come back on port {}", self.port);
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the server: frozen, it accepts TCP connections
    /// (the kernel does) but never answers.
    pub fn freeze(&self, frozen: bool) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let sig = if frozen { "-STOP" } else { "-CONT" };
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success());
    }

    /// Runs a command with redis-cli-free plain RESP (inline) and returns the raw reply.
    pub fn command(&self, line: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_ref() {
            // thaw first, or a frozen server ignores nothing but SIGKILL anyway
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
