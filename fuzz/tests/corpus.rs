//! The fuzz corpora (`fuzz/corpus/TARGET/`), replayed through the targets'
//! functions on stable Rust: every input the fuzzer kept must still pass.
//! `LOOM_FUZZ_SEEDS=write` first writes the seed inputs (real encodings of
//! messages, records and objects) that the corpora start from.

use loom_proto::frame::FrameHeader;
use loom_proto::msg::{
    self, Attr, Envelope, FileKind, MdtRequest, Reply, ReqCtx, Request, TargetId, Time,
};
use loom_proto::{Errno, Fid, WireError};
use loom_server::mdt::records::{DentryRec, InodeRec};
use std::path::{Path, PathBuf};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 4] = [
    ("frame", loom_fuzz::frame),
    ("message", loom_fuzz::message),
    ("mdt_record", loom_fuzz::mdt_record),
    ("ost_object", loom_fuzz::ost_object),
];

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

fn enc<T: serde::Serialize>(v: &T) -> Vec<u8> {
    msg::encode(v).expect("encode")
}

fn picked(pick: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![pick];
    v.extend_from_slice(body);
    v
}

fn envelopes() -> Vec<Envelope> {
    let ctx = ReqCtx {
        client_id: 7,
        seq: 9,
        uid: 1000,
        gid: 100,
        groups: vec![4, 5],
        jobid: "job42".into(),
        ..ReqCtx::default()
    };
    let mdt = |req: MdtRequest| Envelope {
        target: TargetId::mdt(0),
        ctx: ctx.clone(),
        req: Request::Mdt(req),
        capa: None,
        snapshot: None,
    };
    vec![
        mdt(MdtRequest::Lookup {
            parent: Fid::ROOT,
            name: "a".into(),
        }),
        mdt(MdtRequest::GetAttr {
            fid: Fid::new(5, 6),
        }),
        mdt(MdtRequest::Unlink {
            parent: Fid::ROOT,
            name: "gone".into(),
            keep_orphan: true,
        }),
        mdt(MdtRequest::GrantFids { count: 4096 }),
    ]
}

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, e) in envelopes().iter().enumerate() {
        let body = enc(e);
        let name: &'static str = ["lookup", "getattr", "unlink", "grant"][i];
        out.push(("message", name, picked(0, &body)));
        let h = FrameHeader::new(0, e.req.opcode(), 3, &body, b"bulk");
        let mut frame = h.encode().to_vec();
        frame.extend_from_slice(&body);
        frame.extend_from_slice(b"bulk");
        out.push(("frame", name, frame));
    }
    // A replicated OST's traffic: a primary's copy of a write, a
    // server's renewal, and the MGS's and a replica's answers.
    let copy = Envelope {
        target: TargetId::ost(0),
        ctx: ReqCtx::default(),
        req: Request::Replica {
            term: 3,
            req: loom_proto::msg::OstRequest::ObjWrite {
                obj: loom_proto::ObjRef { ost: 0, oid: 9 },
                offset: 4096,
                pack: None,
                grant_used: 0,
                owner: None,
            },
        },
        capa: None,
        snapshot: None,
    };
    let renew = Envelope {
        target: TargetId::MGS,
        ctx: ReqCtx::default(),
        req: Request::Mgs(loom_proto::msg::MgsRequest::Heartbeat {
            addr: "10.0.0.1:7000".into(),
            hosted: vec![loom_proto::replica::Hosted {
                target: TargetId::ost(0),
                replica: 1,
                syncing: vec![(0, 1 << 30)],
            }],
        }),
        capa: None,
        snapshot: None,
    };
    // A replicated MDT's: a primary's shipment and a digest, the
    // batches in a shipment's bulk, and a replica's sums.
    let kv = |req: loom_proto::msg::KvCopy| Envelope {
        target: TargetId::mdt(0),
        ctx: ReqCtx::default(),
        req: Request::KvReplica { term: 4, req },
        capa: None,
        snapshot: None,
    };
    let ship = kv(loom_proto::msg::KvCopy::Ship {
        from: 17,
        sync: true,
    });
    let digest = kv(loom_proto::msg::KvCopy::Digest {
        ranges: vec![loom_proto::replica::KvRange {
            space: 1,
            after: Some(b"a".to_vec()),
            through: None,
        }],
    });
    let op = |space: u8, key: &[u8], value: Option<&[u8]>| loom_proto::replica::KvOp {
        space,
        key: key.to_vec(),
        value: value.map(<[u8]>::to_vec),
    };
    let batches = [
        vec![op(0, b"inode", Some(b"record")), op(1, b"name", None)],
        vec![op(3, b"meta", Some(b""))],
    ];
    out.push((
        "message",
        "kv-batches",
        picked(
            4,
            &loom_proto::replica::kv_wire::encode(batches.iter().map(Vec::as_slice)),
        ),
    ));
    out.push((
        "message",
        "reply-kv-sums",
        picked(1, &enc(&Reply::KvSums(vec![(7, 512), (0, 0)]))),
    ));
    for (name, e) in [
        ("replica-copy", &copy),
        ("heartbeat", &renew),
        ("kv-ship", &ship),
        ("kv-digest", &digest),
    ] {
        out.push(("message", name, picked(0, &enc(e))));
    }
    let mut member = loom_proto::msg::TargetInfo::single(TargetId::ost(0), "u0", "10.0.0.1:7000");
    member.term = 2;
    member.replicas = vec![loom_proto::replica::Replica {
        replica: 0,
        uuid: "u0".into(),
        addr: "10.0.0.1:7000".into(),
        state: loom_proto::replica::ReplicaState::Syncing,
        lag: 5,
        heard_ms: Some(300),
    }];
    out.push((
        "message",
        "reply-members",
        picked(1, &enc(&Reply::Members(vec![member]))),
    ));
    out.push((
        "message",
        "reply-digest",
        picked(
            1,
            &enc(&Reply::Digest {
                size: 3 << 20,
                sums: vec![1, 2, 3],
            }),
        ),
    ));
    let t = Time {
        sec: 1_700_000_000,
        nsec: 5,
    };
    let attr = Attr {
        fid: Fid::new(5, 6),
        kind: FileKind::File,
        perm: 0o644,
        nlink: 1,
        uid: 1000,
        gid: 100,
        size: 4096,
        atime: t,
        mtime: t,
        ctime: t,
        rdev: 0,
        projid: 0,
    };
    let entry = Reply::Entry {
        attr: attr.clone(),
        layout: None,
    };
    out.push(("message", "reply-entry", picked(1, &enc(&entry))));
    out.push((
        "message",
        "reply-attr",
        picked(1, &enc(&Reply::Attr(attr.clone()))),
    ));
    out.push((
        "message",
        "error",
        picked(2, &enc(&WireError::new(Errno::ENOENT, "no such name"))),
    ));
    let commit = msg::Commit {
        boot: 1,
        transno: 2,
        last_committed: 1,
        started_at: 0,
        leased: true,
    };
    let mut committed = enc(&commit);
    committed.extend_from_slice(&enc(&Reply::Ok));
    out.push(("message", "committed-ok", picked(3, &committed)));

    let inode = InodeRec::new(attr, Fid::ROOT);
    out.push(("mdt_record", "inode", picked(0, &enc(&inode))));
    let dentry = DentryRec {
        fid: Fid::new(5, 6),
        kind: FileKind::Dir,
    };
    out.push(("mdt_record", "dentry", picked(1, &enc(&dentry))));
    out.push((
        "mdt_record",
        "destroy",
        picked(2, &enc(&Vec::<loom_proto::layout::ObjRef>::new())),
    ));
    out.push(("mdt_record", "intent", picked(3, &[4])));
    let reply: (Time, u64, Reply) = (Time::default(), 5, Reply::Ok);
    out.push(("mdt_record", "reply", picked(5, &enc(&reply))));
    out.push((
        "mdt_record",
        "orphan",
        picked(6, &enc(&(7u64, Time::default()))),
    ));

    // Real objects, plain and compressed, as the store leaves them.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = loom_store::object::ObjectStore::open(dir.path()).expect("store");
    let text: Vec<u8> = (0..9000u32)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    for (oid, name, pack) in [
        (1u64, "plain", None),
        (2, "lz4", Some(loom_proto::Compress::LZ4)),
    ] {
        store.write(oid, 0, &text[..70_000], pack).expect("write");
        let sums = std::fs::read(store.sums_path(oid)).expect("sums");
        let data = std::fs::read(store.object_path(oid)).expect("data");
        let mut input = vec![0];
        input.extend_from_slice(&(sums.len() as u16).to_le_bytes());
        input.extend_from_slice(&sums);
        input.extend_from_slice(&data);
        out.push(("ost_object", name, input));
    }
    out
}

#[test]
fn every_corpus_input_passes_its_target() {
    if std::env::var("LOOM_FUZZ_SEEDS").as_deref() == Ok("write") {
        for (target, name, bytes) in seeds() {
            let dir = corpus(target);
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
        }
    }
    for (target, run) in TARGETS {
        let dir = corpus(target);
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            run(&std::fs::read(&path).expect("read an input"));
            n += 1;
        }
        assert!(n > 0, "{target}: an empty corpus");
    }
}

#[test]
fn the_seeds_decode_as_what_they_are() {
    // A seed that no longer decodes (a format changed) would start the
    // fuzzer at the decoder's first refusal.
    for (target, name, bytes) in seeds() {
        match target {
            "message" if bytes[0] == 0 => {
                msg::decode::<Envelope>(&bytes[1..]).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            "mdt_record" => {
                let space = loom_server::mdt::stored::SPACES[bytes[0] as usize];
                loom_server::mdt::stored::decode(space, &bytes[1..])
                    .or_else(|e| if name == "intent" { Ok(true) } else { Err(e) })
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            _ => {}
        }
    }
}
