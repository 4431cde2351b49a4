//! `loom bench` without the rest of `loom`: the same arguments, e.g.
//! `cargo run -p loom-bench --example bench -- compare md -n 1000 a=/tmp/a b=/dev/shm/b`.
//! (`sweep` needs `--loom PATH` here, since this binary is not `loom`.)

use clap::Parser;

/// The benchmark subcommands of `loom bench`.
#[derive(Parser, Debug)]
#[command(name = "loom-bench")]
struct Cli {
    #[command(flatten)]
    args: loom_bench::BenchArgs,
}

fn main() -> anyhow::Result<()> {
    loom_bench::run(Cli::parse().args)
}
