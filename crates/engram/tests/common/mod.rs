//! Helpers shared by the integration tests: unique pool paths on tmpfs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

static N: AtomicU32 = AtomicU32::new(0);

/// A fresh pool path under /dev/shm (or the temp dir), removed on drop.
pub struct TempPool(pub PathBuf);

impl TempPool {
    pub fn new(tag: &str) -> Self {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let p = dir.join(format!("engram-test-{}-{}-{}.pool", tag, std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_file(&p);
        TempPool(p)
    }
}

impl Drop for TempPool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
