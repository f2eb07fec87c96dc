//! `#[derive(Persist)]`: ordinary Rust structs written into PTVars are copied
//! into the pool through generated companion structs, survive close and
//! reopen, and read back equal; sharing, recursion, generics, tuple structs
//! and plain (allocation-free) structs.

mod common;
use common::TempPool;
use engram::stm::{PSlice, PStr, PTVar, Persist, STx, StmResult};
use engram::{CreateOptions, Durability, OpenOptions, PPtr, Persistent, Pool};
use std::rc::Rc;
use std::sync::Arc;

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("derive").durability(Durability::Process)).unwrap()
}

fn reopen(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("derive").durability(Durability::Process)).unwrap()
}

/// The object behind a pool pointer (the engine's transactions read it).
fn deref<T: Persistent>(pool: &Pool, p: PPtr<T>) -> T {
    assert!(!p.is_null());
    pool.txn(|tx| tx.read(p)).unwrap()
}

fn string(tx: &STx<'_>, s: PStr) -> StmResult<String> {
    Ok(s.as_str(tx)?.to_string())
}

fn strings(tx: &STx<'_>, s: PSlice<PStr>) -> StmResult<Vec<String>> {
    s.as_slice(tx)?.iter().map(|x| string(tx, *x)).collect()
}

// ----- the types ----------------------------------------------------------

#[derive(Persist, Clone, Debug, PartialEq)]
struct Account {
    owner: String,
    balance: u64,
    tags: Vec<String>,
    next: Option<Rc<Account>>,
}

impl Account {
    fn empty() -> Self {
        Account { owner: String::new(), balance: 0, tags: Vec::new(), next: None }
    }
}

/// Reads an `AccountP` chain back into `Account`s (pointers through the
/// engine, strings through the STM).
fn load_account(pool: &Pool, a: AccountP) -> Account {
    let (owner, tags) = pool.atomically(|tx| Ok((string(tx, a.owner)?, strings(tx, a.tags)?))).unwrap();
    let next = a.next.get().map(|p: PPtr<AccountP>| Rc::new(load_account(pool, deref(pool, p))));
    Account { owner, balance: a.balance, tags, next }
}

/// All fields plain: written without a pool allocation.
#[derive(Persist, Clone, Copy, Debug, PartialEq, Default)]
#[persist(derive(Debug, PartialEq))]
pub struct Point {
    /// Horizontal position.
    pub x: i64,
    /// Vertical position.
    pub y: i64,
    /// Whether it is shown.
    pub visible: bool,
}

/// A tuple struct, with a nested derived struct and a Box.
#[derive(Persist, Clone, Debug, PartialEq)]
struct Segment(Point, Box<Point>, String);

/// Nesting by value and through Option/Vec of derived structs.
#[derive(Persist, Clone, Debug, PartialEq)]
struct Shape {
    name: String,
    corners: Vec<Point>,
    origin: Option<Point>,
    label: Option<Box<Segment>>,
}

/// Sharing: the same Rc reached twice.
#[derive(Persist)]
struct Shared {
    left: Rc<Account>,
    right: Rc<Account>,
    both: (Arc<u64>, Arc<u64>),
}

/// Generic, with the generated `T: Persist` and field bounds.
#[derive(Persist, Clone, Debug, PartialEq)]
struct Tagged<T> {
    tag: String,
    value: T,
    history: Vec<T>,
}

/// Generic, with `Option<T>` and pair fields (bounds `T: Persist`,
/// `T::P: Default`); plain when `T` is.
#[derive(Persist, Clone, Debug, PartialEq)]
struct Slot<T> {
    current: Option<T>,
    pair: (T, u8),
}

/// Generic and recursive, with `Self` in a field.
#[derive(Persist)]
struct List<T> {
    head: T,
    tail: Option<Rc<Self>>,
}

/// Name overrides.
#[derive(Persist, Clone, Copy)]
#[persist(name = "Celsius", type_name = "tests::Temperature")]
struct Temp(f64);

// ----- the tests ----------------------------------------------------------

#[test]
fn companion_layout_is_as_documented() {
    use engram::stm::POption;
    // the generated types are the ones the brief promises
    fn same<A: 'static, B: 'static>() -> bool {
        std::any::TypeId::of::<A>() == std::any::TypeId::of::<B>()
    }
    assert!(same::<<Account as Persist>::P, AccountP>());
    let a = AccountP::default();
    let _: (PStr, u64, PSlice<PStr>, POption<PPtr<AccountP>>) = (a.owner, a.balance, a.tags, a.next);
    assert!(a.next.get().is_none());
    assert_eq!(std::mem::size_of::<AccountP>(), 40);
    let _: (PointP, PPtr<PointP>, PStr) = {
        let s = SegmentP::default();
        (s.0, s.1, s.2)
    };
    assert!(same::<<Tagged<u64> as Persist>::P, TaggedP<u64>>());
    let t = TaggedP::<String>::default();
    let _: (PStr, PStr, PSlice<PStr>) = (t.tag, t.value, t.history);
    let l = ListP::<u32>::default();
    let _: (u32, POption<PPtr<ListP<u32>>>) = (l.head, l.tail);
    let _: f64 = Celsius::default().0;
    // pool type names
    assert_eq!(AccountP::type_name(), "persist_derive::AccountP");
    assert_eq!(TaggedP::<u64>::type_name(), "persist_derive::TaggedP<u64>");
    assert_eq!(TaggedP::<String>::type_name(), "persist_derive::TaggedP<engram::PStr>");
    assert_eq!(TaggedP::<&'static str>::type_name(), TaggedP::<String>::type_name(), "same layout, same pool type");
    assert_eq!(Celsius::type_name(), "tests::Temperature");
    // pointers are reported where they are
    let mut ptrs = Vec::new();
    AccountP::pointer_offsets(&mut ptrs, 0);
    assert_eq!(ptrs, vec![0, 16, 32]);
    let mut ptrs = Vec::new();
    PointP::pointer_offsets(&mut ptrs, 0);
    assert!(ptrs.is_empty());
    // bool is stored as u8; the extra derives apply
    let p = Point { x: 1, y: -2, visible: true }.plain().unwrap();
    assert_eq!(p, PointP { x: 1, y: -2, visible: 1 });
    assert!(format!("{p:?}").contains("visible: 1"));
}

#[test]
fn nested_values_survive_reopen() {
    let t = TempPool::new("derive-nested");
    let pool = create(&t);
    let acct: PTVar<Account> = pool.root("acct", Account::empty).unwrap();
    let shape: PTVar<Box<Shape>> =
        pool.root("shape", || Box::new(Shape { name: String::new(), corners: vec![], origin: None, label: None })).unwrap();
    let seg: PTVar<Segment> = pool.root("seg", || Segment(Point::default(), Box::default(), String::new())).unwrap();

    let bob = Account { owner: "bob".into(), balance: 7, tags: vec![], next: None };
    let carol = Account { owner: "carol".into(), balance: 0, tags: vec!["x".into()], next: Some(Rc::new(bob)) };
    let alice = Account {
        owner: "alice".into(),
        balance: 1_000_000,
        tags: vec!["vip".into(), "früh".into(), String::new()],
        next: Some(Rc::new(carol)),
    };
    let p1 = Point { x: 1, y: 2, visible: true };
    let p2 = Point { x: -3, y: 4, visible: false };
    let segment = Segment(p1, Box::new(p2), "diagonal".into());
    let square = Shape {
        name: "square".into(),
        corners: vec![p1, p2, Point { x: 0, y: 0, visible: true }],
        origin: Some(p2),
        label: Some(Box::new(segment.clone())),
    };
    pool.atomically(|tx| {
        tx.write(&acct, alice.clone())?;
        tx.write(&shape, Box::new(square.clone()))?;
        tx.write(&seg, segment.clone())
    })
    .unwrap();
    pool.close().unwrap();

    let pool = reopen(&t);
    pool.check().unwrap();
    let acct: PTVar<Account> = pool.root("acct", Account::empty).unwrap();
    let shape: PTVar<Box<Shape>> = pool.root("shape", || unreachable!()).unwrap();
    let seg: PTVar<Segment> = pool.root("seg", || unreachable!()).unwrap();

    // Account: strings and vectors through the STM, pointers through the engine
    let a: AccountP = pool.atomically(|tx| tx.read(&acct)).unwrap();
    assert_eq!(load_account(&pool, a), alice);

    // Segment (tuple struct): nested by value and through a Box
    let s: SegmentP = pool.atomically(|tx| tx.read(&seg)).unwrap();
    let name = pool.atomically(|tx| string(tx, s.2)).unwrap();
    let back = Segment(load_point(s.0), Box::new(load_point(deref(&pool, s.1))), name);
    assert_eq!(back, segment);

    // Shape behind a Box
    let sp: PPtr<ShapeP> = pool.atomically(|tx| tx.read(&shape)).unwrap();
    let sh = deref(&pool, sp);
    let (name, corners) = pool
        .atomically(|tx| Ok((string(tx, sh.name)?, sh.corners.as_slice(tx)?.iter().map(|p| load_point(*p)).collect::<Vec<_>>())))
        .unwrap();
    let lp = deref(&pool, sh.label.get().expect("label"));
    let label_text = pool.atomically(|tx| string(tx, lp.2)).unwrap();
    let label = Segment(load_point(lp.0), Box::new(load_point(deref(&pool, lp.1))), label_text);
    let back = Shape { name, corners, origin: sh.origin.get().map(load_point), label: Some(Box::new(label)) };
    assert_eq!(back, square);
    pool.close().unwrap();
}

fn load_point(p: PointP) -> Point {
    assert!(p.visible <= 1);
    Point { x: p.x, y: p.y, visible: p.visible != 0 }
}

#[test]
fn shared_rc_is_copied_once() {
    let t = TempPool::new("derive-shared");
    let pool = create(&t);
    let v: PTVar<Box<Shared>> = pool
        .root("shared", || {
            Box::new(Shared { left: Rc::new(Account::empty()), right: Rc::new(Account::empty()), both: (Arc::new(0), Arc::new(1)) })
        })
        .unwrap();
    let common = Rc::new(Account { owner: "shared".into(), balance: 5, tags: vec!["t".into()], next: None });
    let other = Rc::new(Account { owner: "other".into(), balance: 6, tags: vec![], next: Some(common.clone()) });
    let n = Arc::new(77u64);
    pool.atomically(|tx| {
        // left and right are the same Rc; other.next reaches it a third time
        tx.write(&v, Box::new(Shared { left: common.clone(), right: common.clone(), both: (n.clone(), n.clone()) }))
    })
    .unwrap();
    pool.root::<(Rc<Account>, Rc<Account>)>("pair", || (other.clone(), common.clone())).unwrap();
    pool.close().unwrap();

    let pool = reopen(&t);
    pool.check().unwrap();
    let v: PTVar<Box<Shared>> = pool.root("shared", || unreachable!()).unwrap();
    let w: PTVar<(Rc<Account>, Rc<Account>)> = pool.root("pair", || unreachable!()).unwrap();
    let s = deref(&pool, pool.atomically(|tx| tx.read(&v)).unwrap());
    assert_eq!(s.left, s.right, "the same Rc reached twice yields equal PPtrs");
    assert_eq!(s.both.a, s.both.b, "the same Arc reached twice yields equal PPtrs");
    assert_eq!(deref(&pool, s.both.a), 77);
    assert_eq!(load_account(&pool, deref(&pool, s.left)), *common);
    let pair = pool.atomically(|tx| tx.read(&w)).unwrap();
    let o = deref(&pool, pair.a);
    assert_eq!(o.next.get(), Some(pair.b), "shared within one commit (root initialiser)");
    assert_eq!(load_account(&pool, o), *other);
    pool.close().unwrap();
}

#[test]
fn generic_structs() {
    let t = TempPool::new("derive-generic");
    let pool = create(&t);
    let n: PTVar<Tagged<u64>> = pool.root("n", || Tagged { tag: String::new(), value: 0, history: vec![] }).unwrap();
    let s: PTVar<Tagged<String>> = pool.root("s", || Tagged { tag: String::new(), value: String::new(), history: vec![] }).unwrap();
    let o: PTVar<Tagged<Option<u32>>> = pool.root("o", || Tagged { tag: String::new(), value: None, history: vec![] }).unwrap();
    let l: PTVar<List<i32>> = pool.root("l", || List { head: 0, tail: None }).unwrap();
    let sn: PTVar<Slot<u32>> = pool.root("sn", || Slot { current: None, pair: (0, 0) }).unwrap();
    let ss: PTVar<Slot<String>> = pool.root("ss", || Slot { current: None, pair: (String::new(), 0) }).unwrap();
    assert!(Slot { current: Some(1u32), pair: (2, 3) }.plain().is_some(), "plain when T is");
    assert!(Slot { current: None, pair: (String::new(), 3) }.plain().is_none());
    pool.atomically(|tx| {
        tx.write(&sn, Slot { current: Some(5), pair: (6, 7) })?;
        tx.write(&ss, Slot { current: Some("cur".into()), pair: ("p".into(), 8) })?;
        tx.write(&n, Tagged { tag: "nums".into(), value: 3, history: vec![1, 2] })?;
        tx.write(&s, Tagged { tag: "strs".into(), value: "now".into(), history: vec!["then".into(), "before".into()] })?;
        tx.write(&o, Tagged { tag: "opts".into(), value: Some(9), history: vec![None, Some(8)] })?;
        let tail = Rc::new(List { head: 2, tail: Some(Rc::new(List { head: 3, tail: None })) });
        tx.write(&l, List { head: 1, tail: Some(tail) })
    })
    .unwrap();
    pool.close().unwrap();

    let pool = reopen(&t);
    pool.check().unwrap();
    let n: PTVar<Tagged<u64>> = pool.root("n", || unreachable!()).unwrap();
    let s: PTVar<Tagged<String>> = pool.root("s", || unreachable!()).unwrap();
    let o: PTVar<Tagged<Option<u32>>> = pool.root("o", || unreachable!()).unwrap();
    let l: PTVar<List<i32>> = pool.root("l", || unreachable!()).unwrap();
    let sn: PTVar<Slot<u32>> = pool.root("sn", || unreachable!()).unwrap();
    let ss: PTVar<Slot<String>> = pool.root("ss", || unreachable!()).unwrap();
    let (snb, ssb) = pool
        .atomically(|tx| {
            let a: SlotP<u32> = tx.read(&sn)?;
            let b: SlotP<String> = tx.read(&ss)?;
            let ssb = Slot { current: b.current.get().map(|s| string(tx, s)).transpose()?, pair: (string(tx, b.pair.a)?, b.pair.b) };
            Ok((Slot { current: a.current.get(), pair: (a.pair.a, a.pair.b) }, ssb))
        })
        .unwrap();
    assert_eq!(snb, Slot { current: Some(5), pair: (6, 7) });
    assert_eq!(ssb, Slot { current: Some("cur".to_string()), pair: ("p".to_string(), 8) });
    let (nb, sb, ob) = pool
        .atomically(|tx| {
            let a = tx.read(&n)?;
            let nb = Tagged { tag: string(tx, a.tag)?, value: a.value, history: a.history.as_slice(tx)?.to_vec() };
            let b = tx.read(&s)?;
            let sb = Tagged { tag: string(tx, b.tag)?, value: string(tx, b.value)?, history: strings(tx, b.history)? };
            let c = tx.read(&o)?;
            let ob = Tagged {
                tag: string(tx, c.tag)?,
                value: c.value.get(),
                history: c.history.as_slice(tx)?.iter().map(|x| x.get()).collect(),
            };
            Ok((nb, sb, ob))
        })
        .unwrap();
    assert_eq!(nb, Tagged { tag: "nums".into(), value: 3, history: vec![1, 2] });
    assert_eq!(sb, Tagged { tag: "strs".into(), value: "now".into(), history: vec!["then".into(), "before".into()] });
    assert_eq!(ob, Tagged { tag: "opts".into(), value: Some(9), history: vec![None, Some(8)] });
    let mut items = Vec::new();
    let mut cur: ListP<i32> = pool.atomically(|tx| tx.read(&l)).unwrap();
    loop {
        items.push(cur.head);
        match cur.tail.get() {
            Some(p) => cur = deref(&pool, p),
            None => break,
        }
    }
    assert_eq!(items, vec![1, 2, 3]);
    pool.close().unwrap();
}

#[test]
fn plain_structs_do_not_allocate() {
    let t = TempPool::new("derive-plain");
    let pool = create(&t);
    let p: PTVar<Point> = pool.root("p", Point::default).unwrap();
    let c: PTVar<Temp> = pool.root("c", || Temp(0.0)).unwrap();
    let a: PTVar<Account> = pool.root("a", Account::empty).unwrap();
    assert!(Point { x: 1, y: 2, visible: true }.plain().is_some());
    assert!(Temp(1.5).plain().is_some());
    assert!(Account::empty().plain().is_none(), "a String field needs a copy");
    assert!(Some(Point::default()).plain().is_some(), "plain through Option");
    // warm up (thread log, STM metadata) before counting
    pool.atomically(|tx| tx.write(&p, Point { x: 0, y: 0, visible: false })).unwrap();
    let base = pool.info().live_objects;
    for i in 0..100 {
        pool.atomically(|tx| {
            tx.write(&p, Point { x: i, y: -i, visible: i % 2 == 0 })?;
            tx.write(&c, Temp(i as f64 / 2.0))
        })
        .unwrap();
    }
    assert_eq!(pool.info().live_objects, base, "plain values are written in place");
    pool.atomically(|tx| tx.write(&a, Account { owner: "x".into(), ..Account::empty() })).unwrap();
    assert!(pool.info().live_objects > base, "a non-plain value is copied (control)");
    pool.close().unwrap();

    let pool = reopen(&t);
    let p: PTVar<Point> = pool.root("p", || unreachable!()).unwrap();
    let c: PTVar<Temp> = pool.root("c", || unreachable!()).unwrap();
    let (pp, cc) = pool.atomically(|tx| Ok((tx.read(&p)?, tx.read(&c)?))).unwrap();
    assert_eq!(load_point(pp), Point { x: 99, y: -99, visible: false });
    assert_eq!(cc.0, 49.5);
    // a companion is Persist itself (copied as is): a PTVar of it, and modify
    let q: PTVar<PointP> = pool.root("q", PointP::default).unwrap();
    pool.atomically(|tx| tx.modify(&q, |v| PointP { x: v.x + 5, ..v })).unwrap();
    assert_eq!(pool.atomically(|tx| tx.read(&q)).unwrap().x, 5);
    pool.close().unwrap();
}

#[test]
fn old_copies_are_garbage() {
    let t = TempPool::new("derive-gc");
    let pool = create(&t);
    let a: PTVar<Account> = pool.root("a", Account::empty).unwrap();
    pool.atomically(|tx| tx.write(&a, Account::empty())).unwrap();
    pool.collect().unwrap();
    let base = pool.info().live_objects;
    for i in 0..50u64 {
        let next = Rc::new(Account { owner: format!("n{i}"), balance: i, tags: vec![], next: None });
        pool.atomically(|tx| {
            tx.write(&a, Account { owner: format!("o{i}"), balance: i, tags: vec!["t".into()], next: Some(next.clone()) })
        })
        .unwrap();
    }
    pool.atomically(|tx| tx.write(&a, Account::empty())).unwrap();
    pool.collect().unwrap();
    assert_eq!(pool.info().live_objects, base, "old copies are garbage");
    pool.close().unwrap();
}

/// The example in the derive's rustdoc (marked `ignore` there: the
/// proc-macro crate cannot depend on engram), verbatim.
#[test]
fn rustdoc_example() -> engram::Result<()> {
    mod doc {
        use engram::stm::Persist;
        use std::rc::Rc;

        #[derive(Persist)]
        pub struct Account {
            pub owner: String,
            pub balance: u64,
            pub tags: Vec<String>,
            pub next: Option<Rc<Account>>,
        }
    }
    use doc::{Account, AccountP};
    let t = TempPool::new("derive-doc");
    let path = &t.0;

    let pool = Pool::create(path, CreateOptions::new("bank").durability(Durability::Process))?;
    let head: PTVar<Account> = pool.root("head", || Account { owner: String::new(), balance: 0, tags: vec![], next: None })?;
    let bob = Rc::new(Account { owner: "bob".into(), balance: 5, tags: vec![], next: None });
    pool.atomically(|tx| {
        tx.write(&head, Account { owner: "alice".into(), balance: 10, tags: vec!["vip".into()], next: Some(bob.clone()) })
    })?;
    let (owner, balance) = pool.atomically(|tx| {
        let a: AccountP = tx.read(&head)?;
        Ok((a.owner.as_str(tx)?.to_string(), a.balance))
    })?;
    assert_eq!((owner.as_str(), balance), ("alice", 10));
    // follow a pointer with the engine's transactions:
    let next = pool.atomically(|tx| Ok(tx.read(&head)?.next.get()))?.unwrap();
    let bob_p: AccountP = pool.txn(|tx| tx.read(next))?;
    assert_eq!(bob_p.balance, 5);
    pool.close()
}

/// A cycle through `Rc<RefCell<_>>` becomes a cycle in the pool.
#[test]
fn cycles_through_refcell() {
    use std::cell::RefCell;
    #[derive(Persist)]
    struct Node {
        value: u64,
        next: Option<Rc<RefCell<Self>>>,
    }
    let t = TempPool::new("derive-cycle");
    let pool = create(&t);
    let ring: PTVar<Rc<RefCell<Node>>> = pool.root("ring", || Rc::new(RefCell::new(Node { value: 0, next: None }))).unwrap();
    let a = Rc::new(RefCell::new(Node { value: 1, next: None }));
    let b = Rc::new(RefCell::new(Node { value: 2, next: Some(a.clone()) }));
    a.borrow_mut().next = Some(b.clone());
    pool.atomically(|tx| tx.write(&ring, a.clone())).unwrap();
    a.borrow_mut().next = None; // break the volatile cycle; the pool keeps its copy
    pool.close().unwrap();

    let pool = reopen(&t);
    pool.check().unwrap();
    let ring: PTVar<Rc<RefCell<Node>>> = pool.root("ring", || unreachable!()).unwrap();
    let head: PPtr<NodeP> = pool.atomically(|tx| tx.read(&ring)).unwrap();
    let na = deref(&pool, head);
    let nb = deref(&pool, na.next.get().unwrap());
    assert_eq!((na.value, nb.value), (1, 2));
    assert_eq!(nb.next.get(), Some(head), "the cycle is a cycle in the pool");
    pool.close().unwrap();
}
