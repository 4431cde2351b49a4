//! Helpers for the `loom bench` tests that drive real clusters: a bounded
//! run of the real `loom` binary, a guard that stops whatever a failed
//! test left below a directory, and checks for leftover mounts and server
//! processes.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary under test.
pub fn loom_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom"))
}

/// Runs `loom ARGS` (with `envs`) and returns its output; kills it and
/// fails the test if it runs longer than `limit`.
pub fn loom_bounded(args: &[String], envs: &[(&str, &Path)], limit: Duration) -> Output {
    let mut cmd = Command::new(loom_bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn loom");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(limit) {
        Ok(s) => s.expect("wait"),
        Err(_) => {
            // SIGINT first: loom bench then cleans up as on Ctrl-C.
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            let _ = rx.recv_timeout(Duration::from_secs(60));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("loom {args:?} did not finish within {limit:?}");
        }
    };
    Output {
        status,
        stdout: out_t.join().expect("stdout reader"),
        stderr: err_t.join().expect("stderr reader"),
    }
}

/// Mount points at or below `dir`.
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|m| m.starts_with(dir))
        .collect()
}

/// Pids of processes whose command line mentions `dir` (servers and
/// `loom up`s of clusters whose state lives there).
pub fn processes_mentioning(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(&needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Asserts that nothing of a sweep is left in its scratch directory `dir`:
/// no mount below it, no process naming it, no file or directory in it.
/// `context` (the run's output) goes into the failure message.
pub fn assert_nothing_left_in(dir: &Path, context: &str) {
    assert!(mounts_below(dir).is_empty(), "mounts left\n{context}");
    assert!(
        processes_mentioning(dir).is_empty(),
        "processes left\n{context}"
    );
    let left: Vec<_> = std::fs::read_dir(dir)
        .expect("scratch")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "state left behind: {left:?}\n{context}");
}

/// `loom up` state directories (holding `cluster.toml`) below `dir`.
fn states_below(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    if dir.join("cluster.toml").exists() {
        out.push(dir.to_path_buf());
        return;
    }
    if depth == 0 {
        return;
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                states_below(&e.path(), depth - 1, out);
            }
        }
    }
}

/// On drop, stops every cluster whose state is below the directory and
/// detaches every mount below it, so a failed test leaves nothing running.
pub struct StopClustersBelow(pub PathBuf);

impl Drop for StopClustersBelow {
    fn drop(&mut self) {
        let mut states = Vec::new();
        states_below(&self.0, 4, &mut states);
        for s in states {
            let _ = Command::new(loom_bin())
                .arg("down")
                .arg("--dir")
                .arg(&s)
                .output();
        }
        for m in mounts_below(&self.0) {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// Text of every `<text>` element of an SVG, trimmed.
pub fn svg_texts(svg: &str) -> Vec<String> {
    svg.match_indices("<text ")
        .filter_map(|(at, _)| {
            let rest = &svg[at..];
            let start = rest.find('>')? + 1;
            let end = rest.find("</text>")?;
            Some(rest[start..end].trim().to_string())
        })
        .collect()
}

/// Number of points of each data line (2-pixel polylines) of a line chart.
pub fn svg_line_points(svg: &str) -> Vec<usize> {
    svg.match_indices("<polyline ")
        .filter_map(|(at, _)| {
            let rest = &svg[at..];
            let el = &rest[..rest.find('>')?];
            if !el.contains("stroke-width=\"2\"") {
                return None;
            }
            let p = el.split("points=\"").nth(1)?;
            Some(p[..p.find('"')?].split_whitespace().count())
        })
        .collect()
}

/// The string value of `args` as owned strings.
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}
