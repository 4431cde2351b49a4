//! `loom bench --help` and the help of each subcommand explain the options
//! with mdtest's and IOR's letters and meanings, and the target syntax
//! (a directory, loom:DIR, loom://HOST:PORT/FSNAME/DIR).

mod common;

fn help(args: &[&str]) -> String {
    let mut a = vec!["bench"];
    a.extend_from_slice(args);
    a.push("--help");
    common::loom_ok(&a)
}

fn assert_has(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "help lacks {n:?}:\n{text}");
    }
}

const TARGETS: [&str; 3] = ["loom:DIR", "loom://HOST:PORT/FSNAME", "client library"];

#[test]
fn bench_help_explains_options_in_mdtest_and_ior_terms() {
    let top = help(&[]);
    assert_has(&top, &["md", "io", "io500", "compare", "sweep", "suite"]);
    assert_has(
        &top,
        &["mdtest: -n items per process", "IOR: -t transfer size"],
    );
    assert_has(&top, &TARGETS);

    let md = help(&["md"]);
    assert_has(
        &md,
        &[
            "mdtest -n",
            "mdtest -I",
            "mdtest -z",
            "mdtest -b",
            "mdtest -u",
            "mdtest -F",
            "mdtest -D",
            "mdtest -w",
            "mdtest -e",
            "mdtest -N",
            "(r+2N)",
            "mdtest -W",
            "mdtest/IOR -i",
        ],
    );
    assert_has(&md, &TARGETS);

    let io = help(&["io"]);
    assert_has(
        &io,
        &[
            "IOR -t",
            "IOR -b",
            "IOR -s",
            "IOR -F",
            "IOR -w",
            "IOR -r",
            "IOR -C",
            "IOR -e",
            "IOR -N",
            "IOR -k",
            "verify every byte",
        ],
    );
    assert_has(&io, &TARGETS);

    assert_has(
        &help(&["io500"]),
        &[
            "ior-easy: IOR -t",
            "ior-hard: IOR -s",
            "47008",
            "mdtest-hard: mdtest -n",
            "3901",
        ],
    );
    assert_has(&help(&["compare"]), &["NAME=TARGET", "lib=loom:"]);
    assert_has(&help(&["compare", "io"]), &["IOR -C", "NAME=TARGET"]);
    assert_has(
        &help(&["sweep"]),
        &[
            "mdts",
            "osts",
            "servers",
            "procs",
            "loom setdirstripe",
            "--library",
        ],
    );
    assert_has(&help(&["sweep", "md"]), &["mdtest -n"]);
    assert_has(&help(&["suite"]), &["--baseline", "noise"]);
}
