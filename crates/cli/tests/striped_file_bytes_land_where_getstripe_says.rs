//! A file set to 4 stripes has one object on each of the 4 OSTs that
//! getstripe names, and each byte sits where RAID-0 puts it.
mod common;
use common::*;

#[test]
fn striped_file_bytes_land_where_getstripe_says() {
    let c = Cluster::up(1, 4, &[]);
    let f = c.path("striped.bin");
    let fs = f.to_str().expect("utf8");
    loom_ok(&["setstripe", "-c", "4", "-S", "64K", fs]);
    // 10.5 stripe units: the last row is partial.
    let stripe = 64 * 1024usize;
    let data: Vec<u8> = (0..stripe * 21 / 2).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&f, &data).expect("write");

    let out = loom_ok(&["getstripe", fs]);
    assert!(out.contains("lmm_stripe_count:  4"), "{out}");
    assert!(out.contains("lmm_stripe_size:   65536"), "{out}");
    // The object table: obdidx, objid, objid (hex), group.
    let objs = c.stripes(fs);
    assert_eq!(objs.len(), 4, "{out}");
    let mut osts: Vec<u32> = objs.iter().map(|o| o.0).collect();
    osts.sort();
    assert_eq!(osts, vec![0, 1, 2, 3], "one stripe on each OST");

    // Read every object straight from its OST's directory.
    let objects: Vec<Vec<u8>> = objs
        .iter()
        .map(|(ost, oid)| {
            let p = c.object_file(*ost, *oid);
            std::fs::read(&p).unwrap_or_else(|e| panic!("object {}: {e}", p.display()))
        })
        .collect();
    let total: usize = objects.iter().map(|o| o.len()).sum();
    assert_eq!(total, data.len(), "object sizes add up to the file size");
    for (off, byte) in data.iter().enumerate() {
        let unit = off / stripe;
        let (s, obj_off) = (unit % 4, (unit / 4) * stripe + off % stripe);
        assert_eq!(
            objects[s][obj_off], *byte,
            "file offset {off}: stripe {s}, object offset {obj_off}"
        );
    }
}
