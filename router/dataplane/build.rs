//! Build script: only with the cargo feature `dpdk`, find Debian's DPDK 22.11
//! through pkg-config (`libdpdk`), link it, and compile the C shim
//! (`csrc/shim.c`) that exposes DPDK's inline fast-path functions. Without the
//! feature it does nothing, so the workspace builds on machines without DPDK.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/shim.c");
    #[cfg(feature = "dpdk")]
    dpdk::build();
}

#[cfg(feature = "dpdk")]
mod dpdk {
    pub fn build() {
        let lib = match pkg_config::Config::new()
            .atleast_version("22.11")
            .probe("libdpdk")
        {
            Ok(lib) => lib,
            Err(e) => {
                eprintln!(
                    "error: the `dpdk` feature needs DPDK >= 22.11 found through pkg-config ({e}).\n\
                     On Debian/Ubuntu: apt-get install -y libdpdk-dev pkg-config"
                );
                std::process::exit(1);
            }
        };
        let mut build = cc::Build::new();
        build
            .file("csrc/shim.c")
            .warnings(true)
            .flag_if_supported("-Wno-deprecated-declarations");
        for path in &lib.include_paths {
            build.include(path);
        }
        // pkg-config's cflags also carry `-include rte_config.h` and `-march=...`;
        // rte_config.h must come first in every DPDK translation unit.
        build.flag("-include").flag("rte_config.h");
        for (name, value) in &lib.defines {
            match value {
                Some(v) => build.define(name, v.as_str()),
                None => build.define(name, None),
            };
        }
        // DPDK's headers use SSE4.2 intrinsics on x86 (Debian builds with -march=corei7).
        if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
            build.flag("-march=corei7");
        }
        build.compile("tollgate_dpdk_shim");
    }
}
