//! Builds the C peers in `peers/pmdk_peers.c` (regions) and
//! `peers/pmdk_stm_peers.c` (the STM benchmarks' maps) against the system's
//! libpmemobj (package `libpmemobj-dev`) and links them into this crate.
//!
//! Keeps true: the peers are compiled as C11 with `-Wall -Wextra`, whose
//! warnings cargo shows for this crate (they are not errors, so a newer
//! compiler's new warning cannot break the workspace build); the crate links
//! `pmemobj`, `pmem` and `m` dynamically from the system.

fn main() {
    const SOURCE: &str = "peers/pmdk_peers.c";
    const STM_SOURCE: &str = "peers/pmdk_stm_peers.c";
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed={STM_SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");
    cc::Build::new().file(SOURCE).file(STM_SOURCE).std("c11").warnings(true).extra_warnings(true).compile("engram_pmdk_peers");
    println!("cargo:rustc-link-lib=dylib=pmemobj");
    println!("cargo:rustc-link-lib=dylib=pmem");
    println!("cargo:rustc-link-lib=dylib=m");
}
