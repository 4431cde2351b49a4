//! `loom up` chooses its servers' ports below the kernel's ephemeral range
//! at random; another process (a second cluster starting at the same
//! time, a test's own server) may take one before the server binds it.
//! The suite saw it once: "metrics endpoint: listening on 127.0.0.1:30640:
//! Address already in use", and a cluster that did not start. `loom up`
//! now chooses new ports and starts the servers again. Shown by taking
//! the MGS's recorded metrics port before `loom up` runs again on the same
//! state: it comes up, and the file written before is there.
mod common;
use common::*;

#[test]
fn loom_up_chooses_new_ports_when_one_is_taken() {
    let mut c = Cluster::up(1, 1, &[]);
    std::fs::write(c.path("before"), b"kept").expect("write");
    c.stop_up();
    let shape = std::fs::read_to_string(c.state.join("cluster.toml")).expect("cluster.toml");
    let port: u16 = shape
        .lines()
        .find_map(|l| l.strip_prefix("metrics-mgs = "))
        .and_then(|p| p.trim().parse().ok())
        .expect("the MGS's metrics port in cluster.toml");
    let taken = std::net::TcpListener::bind(("127.0.0.1", port)).expect("take the port");
    c.up_again();
    assert_eq!(std::fs::read(c.path("before")).expect("read"), b"kept");
    let shape = std::fs::read_to_string(c.state.join("cluster.toml")).expect("cluster.toml");
    assert!(
        !shape.contains(&format!("metrics-mgs = {port}")),
        "a new port was recorded"
    );
    drop(taken);
}
