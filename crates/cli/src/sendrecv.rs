//! `loom send` and `loom receive`: a snapshot of a tree as a stream that
//! recreates it on another loomfs, as `zfs send | zfs receive`
//! (`loom_client::send`).

use crate::registry;
use crate::tools::{caller, connect, human};
use anyhow::{anyhow, bail, Context};
use clap::Args;
use loom_client::send::format::SnapRef;
use loom_client::send::receiver::{receive as apply, ReceiveOptions};
use loom_client::send::sender::{send as stream, Sent, Source};
use loom_client::send::Step;
use loom_client::{Client, ClientOptions};
use loom_proto::snapshot::SnapState;
use std::io::{IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `loom send [--from OLD] PATH NAME > STREAM`.
#[derive(Args, Debug)]
pub struct SendArgs {
    /// The tree to send: a directory on a loomfs mount (its mount point
    /// for the whole file system), as it is in the snapshot.
    pub path: PathBuf,
    /// The snapshot to send.
    pub name: String,
    /// Send only what changed since this older snapshot, which the
    /// receiver must have received last.
    #[arg(long)]
    pub from: Option<String>,
    /// Write the stream even to a terminal.
    #[arg(long)]
    pub force: bool,
    /// No progress on standard error.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `loom receive PATH < STREAM`.
#[derive(Args, Debug)]
pub struct ReceiveArgs {
    /// The directory to receive into, on a loomfs mount: an empty one
    /// for a whole stream; for an incremental one, the directory that
    /// received the snapshot the stream builds on.
    pub path: PathBuf,
    /// Do not take a snapshot of the sent snapshot's name once received.
    #[arg(long)]
    pub no_snapshot: bool,
    /// Longest write barrier of that snapshot, in seconds.
    #[arg(long, default_value_t = 30)]
    pub barrier_timeout: u64,
    /// No progress on standard error.
    #[arg(long, short)]
    pub quiet: bool,
}

/// A client of `entry`'s file system reading snapshot `id`, on `rt`.
pub(crate) fn snapshot_client(
    rt: &tokio::runtime::Runtime,
    entry: &registry::Entry,
    id: u32,
) -> anyhow::Result<std::sync::Arc<Client>> {
    let key = loom_server::node::load_key(&entry.key_file)?;
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(60),
        snapshot: Some(id),
        ..ClientOptions::default()
    };
    rt.block_on(Client::connect(&entry.mgs, &entry.fsname, key, opts))
        .map_err(|e| anyhow!("connecting to {}:/{}: {e}", entry.mgs, entry.fsname))
}

/// Send snapshot `new` of the tree at `tree` (since `old`, if given) to
/// `out`, each image read by a client of its own on `rt`, closed after.
pub(crate) fn send_snapshot<W: std::io::Write>(
    rt: &tokio::runtime::Runtime,
    entry: &registry::Entry,
    tree: &[u8],
    new: SnapRef,
    old: Option<SnapRef>,
    out: W,
    step: impl FnMut(Step, &Sent),
) -> anyhow::Result<Sent> {
    let new_client = snapshot_client(rt, entry, new.id)?;
    let old_client = old
        .as_ref()
        .map(|o| snapshot_client(rt, entry, o.id))
        .transpose()?;
    let sent = rt.block_on(stream(
        Source {
            client: &new_client,
            snap: new,
        },
        match (old_client.as_ref(), old) {
            (Some(client), Some(snap)) => Some(Source { client, snap }),
            _ => None,
        },
        tree,
        &caller(),
        out,
        step,
    ));
    rt.block_on(new_client.close());
    if let Some(o) = &old_client {
        rt.block_on(o.close());
    }
    Ok(sent?)
}

/// Progress on standard error, at most once a second (each line on its
/// own when it is not a terminal).
struct Shown {
    last: Option<Instant>,
    tty: bool,
    quiet: bool,
}

impl Shown {
    fn new(quiet: bool) -> Shown {
        Shown {
            last: None,
            tty: std::io::stderr().is_terminal(),
            quiet,
        }
    }

    fn say(&mut self, done: bool, line: impl FnOnce() -> String) {
        if self.quiet {
            return;
        }
        if !done
            && self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.last = Some(Instant::now());
        let mut e = std::io::stderr();
        let _ = if self.tty && !done {
            write!(e, "\r{:<78}", line())
        } else if self.tty {
            writeln!(e, "\r{:<78}", line())
        } else {
            writeln!(e, "{}", line())
        };
    }
}

fn mib(b: u64) -> String {
    human(b / 1024)
}

pub fn send(a: SendArgs) -> anyhow::Result<()> {
    if std::io::stdout().is_terminal() && !a.force {
        bail!("the stream is binary: redirect standard output (loom send ... > FILE, or | loom receive ...), or give --force");
    }
    let (entry, rel) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let c = caller();
    let snaps =
        s.rt.block_on(s.client.snapshots(&c))
            .map_err(|e| crate::tools::errno(e, "listing the snapshots"))?;
    let find = |name: &str| {
        snaps
            .iter()
            .find(|x| x.name == name && x.state == SnapState::Ready)
            .map(|x| SnapRef {
                fsname: s.entry.fsname.clone(),
                name: x.name.clone(),
                id: x.id,
                created: x.created,
            })
            .ok_or_else(|| anyhow!("no snapshot {name:?} (loom snapshot list shows them)"))
    };
    let new = find(&a.name)?;
    let old = a.from.as_deref().map(find).transpose()?;
    if old.as_ref().is_some_and(|o| o.id >= new.id) {
        bail!(
            "--from {}: it must be older than {}",
            a.from.unwrap_or_default(),
            a.name
        );
    }
    let tree = rel.as_os_str().as_bytes().to_vec();
    let mut shown = Shown::new(a.quiet);
    let t0 = Instant::now();
    let out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let sent = send_snapshot(&s.rt, &s.entry, &tree, new, old, out, |step, p| {
        shown.say(step == Step::Done, || match step {
            Step::Scan => format!("send: scanning, {} names", p.inodes),
            _ => format!(
                "send: {} inodes, {} of data, {} of stream, {:.0} s",
                p.inodes,
                mib(p.data),
                mib(p.stream),
                t0.elapsed().as_secs_f64()
            ),
        })
    });
    let sent = sent.context("loom send")?;
    if !a.quiet {
        eprintln!(
            "send: done, {} records, {} of data in {} of stream",
            sent.records,
            mib(sent.data),
            mib(sent.stream)
        );
    }
    Ok(())
}

pub fn receive(a: ReceiveArgs) -> anyhow::Result<()> {
    if std::io::stdin().is_terminal() {
        bail!("the stream comes on standard input: loom receive DIR < FILE, or loom send ... | loom receive DIR");
    }
    if a.barrier_timeout == 0 {
        bail!("--barrier-timeout: at least 1 second");
    }
    let (entry, rel) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let c = caller();
    let opts = ReceiveOptions {
        into: rel.as_os_str().as_bytes().to_vec(),
        snapshot: !a.no_snapshot,
        barrier: Duration::from_secs(a.barrier_timeout),
    };
    let mut shown = Shown::new(a.quiet);
    let t0 = Instant::now();
    let input = std::io::BufReader::with_capacity(1 << 20, std::io::stdin().lock());
    let got =
        s.rt.block_on(apply(&s.client, &c, input, &opts, |step, p| {
            shown.say(step == Step::Done, || match step {
                Step::Skip => format!("receive: resuming, {} records already applied", p.records),
                _ => format!(
                    "receive: {} records, {} of data, {} of stream, {:.0} s",
                    p.records,
                    mib(p.data),
                    mib(p.stream),
                    t0.elapsed().as_secs_f64()
                ),
            })
        }))
        .context("loom receive")?;
    if let Some(h) = &got.header {
        if !a.quiet {
            let how = if got.already {
                " already: nothing to do".to_string()
            } else if got.resumed_at > 0 {
                format!(" (resumed at record {})", got.resumed_at)
            } else {
                String::new()
            };
            eprintln!(
                "receive: snapshot {} of {} received into {}{how}",
                h.snapshot.name,
                h.snapshot.fsname,
                a.path.display()
            );
        }
    }
    Ok(())
}
