//! A changelog consumer that reads and acknowledges records as fast as
//! they come (each acknowledgement purges what it read, so the purge
//! often finds nothing left past it) gets every record in order, none
//! skipped, while two writers make files through the mount. A purge that
//! found nothing once set the first kept record to the next number, so
//! a record numbered while the purge ran was hidden from readers (the
//! policy engine's follower then refused to go on).
mod common;
use common::*;
use loom_client::ClientOptions;
use std::process::Command;
use std::time::Duration;

#[test]
fn a_caught_up_changelog_reader_misses_no_record() {
    let c = Cluster::up(1, 1, &[]);
    let (rt, client) = library_client(&c, ClientOptions::default());
    let user = rt.block_on(client.changelog_register(0)).expect("register");
    let files = 1500;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let d = c.path(&format!("w{w}"));
            std::fs::create_dir(&d).expect("mkdir");
            Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "cd {} && i=0; while [ $i -lt {files} ]; do : > f$i; i=$((i+1)); done",
                    d.display()
                ))
                .spawn()
                .expect("writer")
        })
        .collect();
    let mut writers = writers;
    let mut cursor = 0u64;
    let mut creates = 0;
    let mut reads = 0u64;
    loop {
        let done = writers
            .iter_mut()
            .all(|w| w.try_wait().expect("wait").is_some());
        let (recs, _) = rt
            .block_on(client.changelog_read(0, cursor + 1, 4096, Duration::ZERO))
            .expect("read");
        reads += 1;
        if let Some(first) = recs.first() {
            assert_eq!(
                first.index,
                cursor + 1,
                "records {}..{} were skipped (read {reads})",
                cursor + 1,
                first.index - 1
            );
            for (a, b) in recs.iter().zip(recs.iter().skip(1)) {
                assert_eq!(b.index, a.index + 1, "a gap within one read");
            }
            creates += recs
                .iter()
                .filter(|r| r.kind == loom_proto::changelog::ChangeKind::Create)
                .count();
            cursor = recs.last().map_or(cursor, |r| r.index);
            rt.block_on(client.changelog_clear(0, user, cursor))
                .expect("clear");
        } else if done {
            break;
        }
    }
    assert_eq!(creates, 2 * files, "every create read once ({reads} reads)");
    rt.block_on(client.close());
}
