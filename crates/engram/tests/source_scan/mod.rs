//! Reading the engine's own source for the explorer's bookkeeping tests
//! (`crash_explorer.rs`): the code a user's build compiles, with every
//! `#[cfg(test)]` item left out wherever it stands in a file (the scan this
//! replaces stopped at a file's first `#[cfg(test)]`, so a test item in the
//! middle of a file hid the fences after it), and the calls of the
//! persistence seam in it.
//!
//! A lexer just good enough for this crate's source: it skips comments,
//! string literals (raw ones too) and character literals when it matches
//! braces, and tells a character literal from a lifetime.

use std::path::Path;

/// The non-test source of every `.rs` file under `dir`: (path, text with
/// its test items removed).
pub fn non_test_sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p.display().to_string(), strip_test_items(&text)));
        }
    }
}

/// Whether an attribute's text (`#[...]`) compiles its item only for tests:
/// `cfg(test)` or `cfg(all(test, ...))` (not `cfg(any(test, ...))`, which
/// a feature also turns on, nor `cfg_attr`).
fn test_only(attr: &str) -> bool {
    let a: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    a == "#[cfg(test)]" || a.starts_with("#[cfg(all(test,")
}

/// `text` without its test-only items: each test-only attribute and the
/// item it applies to (up to the `;` or the balanced `{...}` that ends it).
pub fn strip_test_items(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let next = skip_token(b, i);
        if next > i + 1 || b[i] != b'#' || !text[i..].starts_with("#[") {
            out.push_str(&text[i..next]);
            i = next;
            continue;
        }
        let end = matching(b, i + 1) + 1;
        if test_only(&text[i..end]) {
            i = item_end(b, end);
        } else {
            out.push_str(&text[i..end]);
            i = end;
        }
    }
    out
}

/// The end of the item that starts at or after `i`: past its first `;` at
/// depth 0, or past the `}` matching its first `{`.
fn item_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b';' => return i + 1,
            b'{' | b'[' | b'(' => {
                let close = matching(b, i);
                if b[i] == b'{' {
                    return close + 1;
                }
                i = close + 1;
            }
            _ => i = skip_token(b, i),
        }
    }
    b.len()
}

/// The index of the bracket that closes the one at `open`.
fn matching(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'{' | b'[' | b'(' => depth += 1,
            b'}' | b']' | b')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {
                i = skip_token(b, i);
                continue;
            }
        }
        i += 1;
    }
    b.len() - 1
}

/// The index after the token at `i`: a whole comment, string or character
/// literal, else one byte.
fn skip_token(b: &[u8], i: usize) -> usize {
    let at = |k: usize| b.get(k).copied().unwrap_or(0);
    match b[i] {
        b'/' if at(i + 1) == b'/' => b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n),
        b'/' if at(i + 1) == b'*' => find(b, i + 2, b"*/").map_or(b.len(), |n| n + 2),
        b'"' => string_end(b, i + 1),
        b'r' if (at(i + 1) == b'"' || at(i + 1) == b'#') && (i == 0 || !ident(at(i - 1))) => {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if at(i + 1 + hashes) != b'"' {
                return i + 1;
            }
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            find(b, i + 2 + hashes, &close).map_or(b.len(), |n| n + close.len())
        }
        // an escape: the escaped byte, then up to the closing quote ('\'', '\u{7f}')
        b'\'' if at(i + 1) == b'\\' => b[(i + 3).min(b.len())..].iter().position(|&c| c == b'\'').map_or(b.len(), |n| i + 4 + n),
        b'\'' if at(i + 2) == b'\'' => i + 3,
        b'\'' => {
            // a multi-byte character literal, or a lifetime
            let len = utf8_len(at(i + 1));
            if len > 1 && at(i + 1 + len) == b'\'' {
                i + 2 + len
            } else {
                i + 1
            }
        }
        _ => i + 1,
    }
}

fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

fn find(b: &[u8], from: usize, what: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(what.len()).position(|w| w == what).map(|n| from + n)
}

fn ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn utf8_len(c: u8) -> usize {
    match c {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// The argument text of every call of a function named one of `names` in
/// `text` (a whole identifier followed by `(`; definitions included, whose
/// parameter lists hold no literal): (line number, arguments).
pub fn calls<'a>(text: &'a str, names: &[&str]) -> Vec<(usize, &'a str)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let next = skip_token(b, i);
        if next > i + 1 || !ident(b[i]) || (i > 0 && ident(b[i - 1])) {
            i = next;
            continue;
        }
        let end = i + b[i..].iter().take_while(|&&c| ident(c)).count();
        if b.get(end) == Some(&b'(') && names.contains(&&text[i..end]) {
            let close = matching(b, end);
            out.push((text[..i].lines().count().max(1), &text[end + 1..close]));
        }
        i = end;
    }
    out
}

/// Whether `args` holds a string literal (outside comments).
pub fn has_string_literal(args: &str) -> bool {
    let b = args.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' || (b[i] == b'r' && skip_token(b, i) > i + 1) {
            return true;
        }
        i = skip_token(b, i);
    }
    false
}

/// The lexer on the cases it must get right; the old scan missed the
/// fence after a test item in the middle of a file.
#[test]
fn test_items_are_left_out_wherever_they_stand() {
    let text = r##"
fn a() { p.fence(fences::A)?; }
#[cfg(test)]
fn only_in_tests() { p.fence("in a test"); let s = "}"; let c = '}'; let q = '\''; let e = '\u{7d}'; }
#[cfg(all(test, feature = "failpoints"))]
mod t { fn x<'a>(v: &'a str) { fence("t"); /* } */ } }
#[cfg(any(test, feature = "x"))]
fn b() { p.fence("late"); let r = r#"a "quoted" }"#; }
#[cfg_attr(not(test), allow(dead_code))]
fn c() { p.flush_named(x, 8,
    "wrapped") }
#[cfg(test)]
use std::fmt;
fn d() { std::sync::atomic::fence(SeqCst); p.write_persist(o, &v, fences::D) }
"##;
    let s = strip_test_items(text);
    assert!(!s.contains("in a test") && !s.contains("\"t\"") && !s.contains("std::fmt"), "{s}");
    assert!(s.contains("fn a()") && s.contains("\"late\"") && s.contains("fn c()") && s.contains("fn d()"), "{s}");
    let found: Vec<(usize, &str)> = calls(&s, &["fence", "flush_named", "write_persist"]);
    let literal: Vec<&str> = found.iter().filter(|(_, a)| has_string_literal(a)).map(|(_, a)| *a).collect();
    assert_eq!(literal, ["\"late\"", "x, 8,\n    \"wrapped\""], "{found:?}");
    assert_eq!(found.len(), 5, "{found:?}");
}
