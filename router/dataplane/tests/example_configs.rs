//! The example configurations shipped in `router/examples/` stay valid.
//!
//! Every `*.toml` file in that directory (new ones included: the directory
//! is listed, not a fixed set of names) must
//! - parse with [`RouterConfig::load`], the parser `tollgate-router
//!   --config` uses, with every egress pipeline built (ranges checked);
//! - carry the command that runs it, `tollgate-router --config
//!   router/examples/<its name>` with EAL arguments after `--`, in its
//!   comments; the ports it configures must be among the devices that
//!   command creates (`--vdev`) or allows (`-a`), and the lcores of its
//!   `[pipeline]` among the command's `-l` list;
//! - be named in `router/DPDK.md`, so that users find it.
//!
//! Needs no DPDK: the configuration parser is always compiled.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tollgate_dataplane::config::{Mode, RouterConfig};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Every `*.toml` file of `router/examples/`, sorted.
fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("router/examples/ exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

fn name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

fn load(path: &Path) -> RouterConfig {
    RouterConfig::load(path.to_str().expect("UTF-8 path"))
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", name(path)))
}

/// The EAL arguments of the `tollgate-router --config router/examples/NAME`
/// command in the file's comments (continuation lines joined).
fn run_command_eal_args(path: &Path, text: &str) -> Vec<String> {
    let want = format!("tollgate-router --config router/examples/{}", name(path));
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(str::trim)
        .collect();
    let start = lines
        .iter()
        .position(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("{}: no `{want}` command in its comments", name(path)));
    let mut command = String::new();
    for l in &lines[start..] {
        match l.strip_suffix('\\') {
            Some(part) => command.push_str(part),
            None => {
                command.push_str(l);
                break;
            }
        }
        command.push(' ');
    }
    let (_, eal) = command.split_once(" -- ").unwrap_or_else(|| {
        panic!(
            "{}: the command has no `--` before the EAL arguments: {command}",
            name(path)
        )
    });
    eal.split_whitespace().map(str::to_string).collect()
}

/// `0`, `1-3`, `0,2-3` as lcore ids.
fn lcore_list(s: &str) -> BTreeSet<u32> {
    let mut set = BTreeSet::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => set.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => {
                set.insert(part.parse::<u32>().unwrap());
            }
        }
    }
    set
}

/// The devices the EAL arguments create or allow, and the lcores they list.
fn devices_and_lcores(eal: &[String]) -> (BTreeSet<String>, BTreeSet<u32>) {
    let mut devices = BTreeSet::new();
    let mut lcores = BTreeSet::new();
    for pair in eal.windows(2) {
        match pair[0].as_str() {
            // `--vdev net_af_packet0,iface=veth0`: the device is net_af_packet0.
            "--vdev" => {
                devices.insert(pair[1].split(',').next().unwrap().to_string());
            }
            "-a" | "--allow" => {
                devices.insert(pair[1].split(',').next().unwrap().to_string());
            }
            "-l" => lcores = lcore_list(&pair[1]),
            _ => {}
        }
    }
    (devices, lcores)
}

#[test]
fn every_example_parses_and_runs_with_its_documented_command() {
    let files = examples();
    assert!(
        files.len() >= 4,
        "router/examples/ holds {} configurations, expected at least 4",
        files.len()
    );
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let cfg = load(path);
        let eal = run_command_eal_args(path, &text);
        let (devices, lcores) = devices_and_lcores(&eal);
        assert!(
            !lcores.is_empty(),
            "{}: its command sets no `-l` lcore list: {eal:?}",
            name(path)
        );
        for p in &cfg.ports {
            assert!(
                devices.contains(&p.device),
                "{}: port {:?} is neither a --vdev nor an -a device of its command {eal:?}",
                name(path),
                p.device
            );
        }
        if let Some(pl) = &cfg.pipeline {
            for l in pl.workers.iter().chain(pl.schedulers.values()) {
                assert!(
                    lcores.contains(l),
                    "{}: pipeline lcore {l} is not in its command's -l list {lcores:?}",
                    name(path)
                );
            }
        }
    }
}

#[test]
fn every_example_is_named_in_the_operator_guide() {
    let guide = std::fs::read_to_string(examples_dir().join("../DPDK.md")).unwrap();
    for path in examples() {
        let link = format!("examples/{}", name(&path));
        assert!(
            guide.contains(&link),
            "router/DPDK.md does not mention {link}: add it to the list of example configurations"
        );
    }
}

/// The four shipped examples show what the guide says they show.
#[test]
fn the_shipped_examples_cover_the_four_setups() {
    let dir = examples_dir();
    let get = |n: &str| load(&dir.join(n));

    let null = get("net-null.toml");
    assert!(null.ports.iter().all(|p| p.synthetic.is_some()));
    assert!(null.ports.iter().all(|p| p.device.starts_with("net_null")));

    let veth = get("veth.toml");
    assert!(veth
        .ports
        .iter()
        .all(|p| p.device.starts_with("net_af_packet")));
    assert!(veth.pcap.is_some());

    let ten = get("10gbe-two-lcores.toml");
    let pl = ten.pipeline.as_ref().expect("a [pipeline] table");
    let used: BTreeSet<u32> = pl
        .workers
        .iter()
        .chain(pl.schedulers.values())
        .copied()
        .collect();
    assert_eq!(used.len(), 2, "two forwarding lcores: {used:?}");
    assert!(
        ten.ports.iter().all(|p| p.device.contains(':')),
        "PCI ports"
    );

    let l3 = get("l3.toml");
    assert_eq!(l3.mode, Mode::L3);
    assert!(!l3.routes.is_empty() && !l3.neighbours.is_empty());
    assert!(l3
        .ports
        .iter()
        .all(|p| p.ipv4.is_some() && p.ipv6.is_some()));
}

#[test]
fn a_broken_example_would_fail() {
    // The checks above are not vacuous: an unknown key, a port the command
    // does not create, and a pipeline lcore outside -l are each caught.
    let dir = examples_dir();
    let good = std::fs::read_to_string(dir.join("net-null.toml")).unwrap();
    assert!(RouterConfig::parse(&format!("no_such_key = 1\n{good}")).is_err());
    let eal: Vec<String> = "-l 0 --vdev net_null0"
        .split(' ')
        .map(String::from)
        .collect();
    let (devices, lcores) = devices_and_lcores(&eal);
    assert!(!devices.contains("net_null1"));
    assert_eq!(lcores, BTreeSet::from([0]));
    assert_eq!(lcore_list("1-3"), BTreeSet::from([1, 2, 3]));
}
