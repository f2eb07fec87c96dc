//! include/engram.h is current: regenerates the header with cbindgen (as a
//! library, so nothing has to be installed) and fails if it differs from
//! the checked-in file. `ENGRAM_BLESS=1` rewrites the file instead.

use std::path::PathBuf;

#[test]
fn header_is_current() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = crate_dir.join("../../include/engram.h");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let mut fresh = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("header is UTF-8");
    if std::env::var_os("ENGRAM_BLESS").is_some() {
        std::fs::write(&header, &fresh).expect("write include/engram.h");
        return;
    }
    let current = std::fs::read_to_string(&header).unwrap_or_default();
    assert!(
        current == fresh,
        "include/engram.h is stale: run `ENGRAM_BLESS=1 cargo test -p engram-ffi --test header` and commit it"
    );
}
