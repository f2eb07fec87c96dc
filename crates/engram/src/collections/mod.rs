//! Persistent collections (filled in below).
