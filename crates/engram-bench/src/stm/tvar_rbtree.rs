//! The fully volatile peer of the STM benchmarks: the red-black tree of
//! Engram's `RbTree` (CLRS without a sentinel, the same steps line for
//! line) over volatile [`engram::stm::TVar`]s, run by
//! [`engram::stm::atomically`] (lookups: [`engram::stm::atomically_read`],
//! the read-only path) — no pool, no redo log, no flush.
//!
//! Layout: each node is one allocation, a [`TBox`](engram::stm::TBox) of six transactional
//! words ([`TWord`]: lock word and value word, inline), key, left and
//! right first (the fields a lookup reads). A link is a `Link`: the node's
//! address (as TinySTM's tree holds a node pointer), 0 for null, so
//! following one is a load, and a field read is the node's own lock word
//! and value word: no handle, no cell of its own, no arena lookup. The
//! arena keeps every node's box until the tree is dropped, so a node's
//! words never move or die while the tree exists.
//!
//! Recycling: a node a delete unlinks goes, after that transaction commits,
//! to the deleting thread's free list, and a later insert of that thread
//! reuses it, writing all its fields in the inserting transaction. That is
//! safe without any reclamation scheme because nodes are never freed:
//! a transaction that still reaches the old node sees fields newer than its
//! snapshot, fails to extend it (the link it followed changed), and runs
//! again — the STM's own validation. Keys are therefore words too.
//!
//! Keeps true: the same invariants as `RbTree` ([`TVarRbTree::contents`]
//! checks order, parent links, colours and black heights); an insert that
//! does not link its spare node gives it back to the free list; every
//! `Link` is null or the address of a node of the tree's arena (the
//! `link` module: a `Link` is made only by the arena or read from a
//! link word, which only ever holds `Link`s).

use engram::stm::{atomically, atomically_read, ReadTx, STx, StmError, StmResult, TWord};

use super::workload::{BenchError, Contents, Op, TxMap};
use link::{Arena, Link, NIL};

/// A node: six words in one allocation (a `TBox`).
struct Node {
    key: TWord<u64>,
    left: TWord<u64>,
    right: TWord<u64>,
    value: TWord<u64>,
    parent: TWord<u64>,
    red: TWord<u64>,
}

impl Node {
    fn new() -> Self {
        Node {
            key: TWord::new(0),
            left: TWord::new(NIL.bits()),
            right: TWord::new(NIL.bits()),
            value: TWord::new(0),
            parent: TWord::new(NIL.bits()),
            red: TWord::new(0),
        }
    }
}

/// Which word of a node a link field is.
#[derive(Clone, Copy)]
enum LinkField {
    Left,
    Right,
    Parent,
}

/// Which plain word of a node.
#[derive(Clone, Copy)]
enum Field {
    Key,
    Value,
    Red,
}

/// Node addresses: the only place a [`Link`] is made or followed.
mod link {
    use super::{BenchError, Field, LinkField, Node};
    use engram::stm::{ReadTx, STx, StmResult, TBox, TRef, TWordRef};

    /// A node of one tree's arena, by address (0: none). Made only by
    /// [`Arena::fresh`] and [`Arena::link`], so it is always null or a
    /// node of the arena that made it.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub struct Link(u64);

    /// The null link.
    pub const NIL: Link = Link(0);

    impl Link {
        /// What a link word holds for this link.
        pub const fn bits(self) -> u64 {
            self.0
        }
    }

    /// The nodes, each boxed, kept until the arena (the tree) is dropped.
    pub struct Arena {
        nodes: std::sync::Mutex<Vec<TBox<Node>>>,
        /// What the null link stands for if followed (never, by the
        /// tree's algorithms; this keeps [`Arena::node`] total).
        nil: TBox<Node>,
    }

    impl Arena {
        pub fn new() -> Self {
            Arena { nodes: std::sync::Mutex::new(Vec::new()), nil: TBox::new(Node::new()) }
        }

        /// A node never handed out before.
        pub fn fresh(&self) -> Result<Link, BenchError> {
            let b = TBox::new(Node::new());
            let l = Link(b.as_ptr() as u64);
            self.nodes.lock().map_err(|_| BenchError::Invalid("the TVar tree's arena lock is poisoned".into()))?.push(b);
            Ok(l)
        }

        /// The node `l` names.
        #[inline(always)]
        pub fn node(&self, l: Link) -> TRef<'_, Node> {
            if l == NIL {
                return self.nil.as_ref();
            }
            // SAFETY: a non-null `Link` is the address of a node boxed by
            // this arena (made by `fresh`, or read from a link word, which
            // holds only such links; links never cross trees), and the
            // arena keeps every box until it is dropped, which `&self`
            // borrows.
            unsafe { TRef::from_raw(l.0 as *const Node) }
        }

        /// Word `f` of node `n`.
        #[inline(always)]
        pub fn word(&self, n: Link, f: Field) -> TWordRef<'_, u64> {
            let r = self.node(n);
            match f {
                Field::Key => r.word(|s| &s.key),
                Field::Value => r.word(|s| &s.value),
                Field::Red => r.word(|s| &s.red),
            }
        }

        /// Link word `f` of node `n` (it holds only [`Link`]s).
        #[inline(always)]
        fn link_word(&self, n: Link, f: LinkField) -> TWordRef<'_, u64> {
            let r = self.node(n);
            match f {
                LinkField::Left => r.word(|s| &s.left),
                LinkField::Right => r.word(|s| &s.right),
                LinkField::Parent => r.word(|s| &s.parent),
            }
        }

        /// The link in word `f` of node `n`.
        #[inline(always)]
        pub fn link<T: ReadTx>(&self, tx: &T, n: Link, f: LinkField) -> StmResult<Link> {
            tx.get(&self.link_word(n, f)).map(Link)
        }

        /// Sets word `f` of node `n` to `l`.
        #[inline(always)]
        pub fn set_link(&self, tx: &STx<'_>, n: Link, f: LinkField, l: Link) -> StmResult<()> {
            tx.write(&self.link_word(n, f), l.0)
        }
    }

    /// The tree's root link (a word of its own box, holding only `Link`s).
    pub struct Top(TBox<engram::stm::TWord<u64>>);

    impl Top {
        pub fn nil() -> Self {
            Top(TBox::new(engram::stm::TWord::new(NIL.0)))
        }
        #[inline]
        pub fn get<T: ReadTx>(&self, tx: &T) -> StmResult<Link> {
            tx.get(&self.0.as_ref().word(|w| w)).map(Link)
        }
        #[inline]
        pub fn set(&self, tx: &STx<'_>, l: Link) -> StmResult<()> {
            tx.write(&self.0.as_ref().word(|w| w), l.0)
        }
    }
}

/// A red-black tree from u64 to u64 over volatile TVars.
pub struct TVarRbTree {
    top: link::Top,
    arena: Arena,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Left,
    Right,
}

impl Dir {
    #[inline(always)]
    fn field(self) -> LinkField {
        match self {
            Dir::Left => LinkField::Left,
            Dir::Right => LinkField::Right,
        }
    }

    fn flip(self) -> Dir {
        match self {
            Dir::Left => Dir::Right,
            Dir::Right => Dir::Left,
        }
    }
}

fn broken(what: String) -> StmError {
    StmError::Failed(engram::Error::Corrupt { what })
}

impl Default for TVarRbTree {
    fn default() -> Self {
        Self::new()
    }
}

impl TVarRbTree {
    /// An empty tree.
    pub fn new() -> Self {
        TVarRbTree { top: link::Top::nil(), arena: Arena::new() }
    }

    #[inline(always)]
    fn read<T: ReadTx>(&self, tx: &T, n: Link, f: Field) -> StmResult<u64> {
        tx.get(&self.arena.word(n, f))
    }

    #[inline(always)]
    fn write(&self, tx: &STx<'_>, n: Link, f: Field, v: u64) -> StmResult<()> {
        tx.write(&self.arena.word(n, f), v)
    }

    #[inline(always)]
    fn key<T: ReadTx>(&self, tx: &T, n: Link) -> StmResult<u64> {
        self.read(tx, n, Field::Key)
    }

    #[inline(always)]
    fn child<T: ReadTx>(&self, tx: &T, n: Link, d: Dir) -> StmResult<Link> {
        self.arena.link(tx, n, d.field())
    }

    fn set_child(&self, tx: &STx<'_>, n: Link, d: Dir, c: Link) -> StmResult<()> {
        self.arena.set_link(tx, n, d.field(), c)
    }

    fn parent(&self, tx: &STx<'_>, n: Link) -> StmResult<Link> {
        self.arena.link(tx, n, LinkField::Parent)
    }

    fn set_parent(&self, tx: &STx<'_>, n: Link, p: Link) -> StmResult<()> {
        self.arena.set_link(tx, n, LinkField::Parent, p)
    }

    fn is_red(&self, tx: &STx<'_>, n: Link) -> StmResult<bool> {
        Ok(n != NIL && self.read(tx, n, Field::Red)? != 0)
    }

    fn set_red(&self, tx: &STx<'_>, n: Link, red: bool) -> StmResult<()> {
        self.write(tx, n, Field::Red, red as u64)
    }

    fn side(&self, tx: &STx<'_>, p: Link, n: Link) -> StmResult<Dir> {
        Ok(if self.child(tx, p, Dir::Left)? == n { Dir::Left } else { Dir::Right })
    }

    fn relink(&self, tx: &STx<'_>, parent: Link, old: Link, new: Link) -> StmResult<()> {
        if parent == NIL {
            return self.top.set(tx, new);
        }
        let d = self.side(tx, parent, old)?;
        self.set_child(tx, parent, d, new)
    }

    fn rotate(&self, tx: &STx<'_>, x: Link, d: Dir) -> StmResult<()> {
        let y = self.child(tx, x, d.flip())?;
        let b = self.child(tx, y, d)?;
        self.set_child(tx, x, d.flip(), b)?;
        if b != NIL {
            self.set_parent(tx, b, x)?;
        }
        let p = self.parent(tx, x)?;
        self.set_parent(tx, y, p)?;
        self.relink(tx, p, x, y)?;
        self.set_child(tx, y, d, x)?;
        self.set_parent(tx, x, y)
    }

    fn find<T: ReadTx>(&self, tx: &T, key: u64) -> StmResult<Link> {
        let mut cur = self.top.get(tx)?;
        while cur != NIL {
            cur = match key.cmp(&self.key(tx, cur)?) {
                std::cmp::Ordering::Less => self.child(tx, cur, Dir::Left)?,
                std::cmp::Ordering::Greater => self.child(tx, cur, Dir::Right)?,
                std::cmp::Ordering::Equal => return Ok(cur),
            };
        }
        Ok(NIL)
    }

    /// The key's value.
    pub fn get<T: ReadTx>(&self, tx: &T, key: u64) -> StmResult<Option<u64>> {
        let n = self.find(tx, key)?;
        if n == NIL {
            return Ok(None);
        }
        self.read(tx, n, Field::Value).map(Some)
    }

    /// Sets the key's value, linking node `spare` if the key is new;
    /// returns whether `spare` was linked.
    fn insert(&self, tx: &STx<'_>, key: u64, value: u64, spare: Link) -> StmResult<bool> {
        let (mut parent, mut cur, mut d) = (NIL, self.top.get(tx)?, Dir::Left);
        while cur != NIL {
            d = match key.cmp(&self.key(tx, cur)?) {
                std::cmp::Ordering::Less => Dir::Left,
                std::cmp::Ordering::Greater => Dir::Right,
                std::cmp::Ordering::Equal => {
                    self.write(tx, cur, Field::Value, value)?;
                    return Ok(false);
                }
            };
            parent = cur;
            cur = self.child(tx, cur, d)?;
        }
        let z = spare;
        self.write(tx, z, Field::Key, key)?;
        self.write(tx, z, Field::Value, value)?;
        self.set_child(tx, z, Dir::Left, NIL)?;
        self.set_child(tx, z, Dir::Right, NIL)?;
        self.set_parent(tx, z, parent)?;
        self.write(tx, z, Field::Red, 1)?;
        if parent == NIL {
            self.top.set(tx, z)?;
        } else {
            self.set_child(tx, parent, d, z)?;
        }
        self.fix_insert(tx, z)?;
        Ok(true)
    }

    fn fix_insert(&self, tx: &STx<'_>, mut z: Link) -> StmResult<()> {
        loop {
            let mut p = self.parent(tx, z)?;
            if p == NIL || !self.is_red(tx, p)? {
                break;
            }
            let g = self.parent(tx, p)?;
            let d = self.side(tx, g, p)?;
            let uncle = self.child(tx, g, d.flip())?;
            if self.is_red(tx, uncle)? {
                self.set_red(tx, p, false)?;
                self.set_red(tx, uncle, false)?;
                self.set_red(tx, g, true)?;
                z = g;
                continue;
            }
            if self.child(tx, p, d.flip())? == z {
                self.rotate(tx, p, d)?;
                z = p;
                p = self.parent(tx, z)?;
            }
            self.set_red(tx, p, false)?;
            self.set_red(tx, g, true)?;
            self.rotate(tx, g, d.flip())?;
            break;
        }
        let top = self.top.get(tx)?;
        if self.is_red(tx, top)? {
            self.set_red(tx, top, false)?;
        }
        Ok(())
    }

    /// Removes the key; the node it unlinked.
    fn remove(&self, tx: &STx<'_>, key: u64) -> StmResult<Option<Link>> {
        let z = self.find(tx, key)?;
        if z == NIL {
            return Ok(None);
        }
        let (zl, zr) = (self.child(tx, z, Dir::Left)?, self.child(tx, z, Dir::Right)?);
        let (x, xp, removed_black);
        if zl == NIL || zr == NIL {
            x = if zl == NIL { zr } else { zl };
            xp = self.parent(tx, z)?;
            removed_black = !self.is_red(tx, z)?;
            self.replace(tx, z, xp, x)?;
        } else {
            let mut y = zr;
            loop {
                let l = self.child(tx, y, Dir::Left)?;
                if l == NIL {
                    break;
                }
                y = l;
            }
            removed_black = !self.is_red(tx, y)?;
            x = self.child(tx, y, Dir::Right)?;
            if y == zr {
                xp = y;
            } else {
                xp = self.parent(tx, y)?;
                self.replace(tx, y, xp, x)?;
                self.set_child(tx, y, Dir::Right, zr)?;
                self.set_parent(tx, zr, y)?;
            }
            let zp = self.parent(tx, z)?;
            self.replace(tx, z, zp, y)?;
            self.set_child(tx, y, Dir::Left, zl)?;
            self.set_parent(tx, zl, y)?;
            self.set_red(tx, y, self.is_red(tx, z)?)?;
        }
        if removed_black {
            self.fix_remove(tx, x, xp)?;
        }
        Ok(Some(z))
    }

    fn replace(&self, tx: &STx<'_>, u: Link, up: Link, v: Link) -> StmResult<()> {
        self.relink(tx, up, u, v)?;
        if v != NIL {
            self.set_parent(tx, v, up)?;
        }
        Ok(())
    }

    fn fix_remove(&self, tx: &STx<'_>, mut x: Link, mut xp: Link) -> StmResult<()> {
        while xp != NIL && !self.is_red(tx, x)? {
            let d = self.side(tx, xp, x)?;
            let mut w = self.child(tx, xp, d.flip())?;
            if self.is_red(tx, w)? {
                self.set_red(tx, w, false)?;
                self.set_red(tx, xp, true)?;
                self.rotate(tx, xp, d)?;
                w = self.child(tx, xp, d.flip())?;
            }
            let (near, far) = (self.child(tx, w, d)?, self.child(tx, w, d.flip())?);
            if !self.is_red(tx, near)? && !self.is_red(tx, far)? {
                self.set_red(tx, w, true)?;
                x = xp;
                xp = self.parent(tx, x)?;
                continue;
            }
            if !self.is_red(tx, far)? {
                self.set_red(tx, near, false)?;
                self.set_red(tx, w, true)?;
                self.rotate(tx, w, d.flip())?;
                w = self.child(tx, xp, d.flip())?;
            }
            self.set_red(tx, w, self.is_red(tx, xp)?)?;
            self.set_red(tx, xp, false)?;
            let far = self.child(tx, w, d.flip())?;
            self.set_red(tx, far, false)?;
            self.rotate(tx, xp, d)?;
            return Ok(());
        }
        if self.is_red(tx, x)? {
            self.set_red(tx, x, false)?;
        }
        Ok(())
    }

    /// Checks the subtree at `n`; returns its black height.
    fn check_node(
        &self,
        tx: &STx<'_>,
        n: Link,
        parent: Link,
        bounds: (Option<u64>, Option<u64>),
        depth: u32,
        c: &mut Contents,
    ) -> StmResult<u64> {
        if n == NIL {
            return Ok(1);
        }
        let k = self.key(tx, n)?;
        let ordered = bounds.0.is_none_or(|lo| lo < k) && bounds.1.is_none_or(|hi| k < hi);
        if !ordered || self.parent(tx, n)? != parent || depth > 128 {
            return Err(broken(format!("TVar tree node {n:?}: out of order, wrong parent, or too deep")));
        }
        let red = self.read(tx, n, Field::Red)?;
        let (l, r) = (self.child(tx, n, Dir::Left)?, self.child(tx, n, Dir::Right)?);
        if red > 1 || (red == 1 && (self.is_red(tx, l)? || self.is_red(tx, r)?)) {
            return Err(broken(format!("TVar tree node {n:?}: colour {red}, or a red node with a red child")));
        }
        c.add(k, self.read(tx, n, Field::Value)?);
        let bl = self.check_node(tx, l, n, (bounds.0, Some(k)), depth + 1, c)?;
        let br = self.check_node(tx, r, n, (Some(k), bounds.1), depth + 1, c)?;
        if bl != br {
            return Err(broken(format!("TVar tree node {n:?}: black heights {bl} and {br}")));
        }
        Ok(bl + (red == 0) as u64)
    }
}

impl TxMap for TVarRbTree {
    /// Nodes this thread unlinked, to reuse.
    type Local = Vec<Link>;

    fn apply(&self, free: &mut Vec<Link>, op: Op) -> Result<bool, BenchError> {
        match op {
            Op::Lookup(k) => {
                std::hint::black_box(atomically_read(|tx| self.get(tx, k))?);
                Ok(false)
            }
            Op::Insert(k, v) => {
                let spare = match free.pop() {
                    Some(id) => id,
                    None => self.arena.fresh()?,
                };
                if !atomically(|tx| self.insert(tx, k, v, spare))? {
                    free.push(spare);
                }
                Ok(true)
            }
            Op::Delete(k) => match atomically(|tx| self.remove(tx, k))? {
                Some(id) => {
                    free.push(id);
                    Ok(true)
                }
                None => Ok(false),
            },
        }
    }

    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
        let spares = pairs.iter().map(|_| self.arena.fresh()).collect::<Result<Vec<_>, _>>()?;
        atomically(|tx| pairs.iter().zip(&spares).try_for_each(|(&(k, v), &s)| self.insert(tx, k, v, s).map(drop)))?;
        // Spares of keys that were already present stay unused: harmless.
        Ok(())
    }

    fn contents(&self) -> Result<Contents, BenchError> {
        Ok(atomically(|tx| {
            let top = self.top.get(tx)?;
            if self.is_red(tx, top)? {
                return Err(broken("TVar tree: the top is red".into()));
            }
            let mut c = Contents::default();
            self.check_node(tx, top, NIL, (None, None), 1, &mut c)?;
            Ok(c)
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stm::workload::{drive, model_contents, prefill, prefill_pairs, Phase, RunFor};

    #[test]
    fn agrees_with_the_model() {
        let t = TVarRbTree::new();
        prefill(&t, &prefill_pairs(2000, 1000, 3)).unwrap();
        let phase = Phase { threads: 1, lookup_pct: 20, key_range: 2000, seed: 3, run: RunFor::Ops(5000) };
        let tally = drive(&t, &phase).unwrap();
        assert_eq!(tally.commits(), 5000);
        assert_eq!(t.contents().unwrap(), model_contents(2000, 1000, 20, 3, 5000));
    }

    #[test]
    fn threads_keep_it_valid() {
        let t = TVarRbTree::new();
        prefill(&t, &prefill_pairs(500, 250, 4)).unwrap();
        let phase = Phase { threads: 4, lookup_pct: 0, key_range: 500, seed: 4, run: RunFor::Time(std::time::Duration::from_millis(200)) };
        drive(&t, &phase).unwrap();
        t.contents().unwrap();
    }
}
