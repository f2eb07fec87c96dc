//! The function registry: thunks name their function by a stable string,
//! registered by the program at start-up, so a pool outlives the binary that
//! made it (the paper's single-binary limitation lifted).
//!
//! A registration records the name, its 64-bit stable hash (what a thunk
//! stores beside the name), the function, and the type names of its
//! argument and result. Looking up a name that no function has is
//! [`Error::UnknownFunction`]; one registered with other argument or result
//! types is [`Error::LayoutMismatch`]. Registering the same name again
//! replaces the function (the types must match the old ones only when a
//! thunk is forced).
//!
//! Volatile only; nothing here touches a pool.

use super::reader::{Cx, Load};
use crate::error::{Error, Result};
use crate::hash::FastMap;
use crate::Persistent;
use parking_lot::RwLock;
use std::any::Any;
use std::sync::Arc;

/// A registered function with its types.
pub(crate) type Func<A, T> = Arc<dyn Fn(&Cx<'_>, A) -> Result<T> + Send + Sync>;

struct Entry {
    name: String,
    arg: String,
    result: &'static str,
    func: Arc<dyn Any + Send + Sync>,
}

static REGISTRY: RwLock<Option<FastMap<u64, Entry>>> = parking_lot::const_rwlock(None);

/// The stable id of a function name.
pub(crate) fn id_of(name: &str) -> u64 {
    crate::hash::stable_hash(name)
}

/// Registers `f` under the stable `name` (at most [`super::NAME_MAX`]
/// bytes): thunks that name it evaluate `f(cx, args)`. Fails if `name` is
/// too long or hashes like another registered name.
pub fn register<A, T, F>(name: &str, f: F) -> Result<()>
where
    A: Persistent,
    T: Load,
    F: Fn(&Cx<'_>, A) -> Result<T> + Send + Sync + 'static,
{
    if name.is_empty() || name.len() > super::NAME_MAX {
        return Err(Error::invalid(format!("function name {name:?} must have 1 to {} bytes", super::NAME_MAX)));
    }
    let id = id_of(name);
    let func: Func<A, T> = Arc::new(f);
    let mut reg = REGISTRY.write();
    let reg = reg.get_or_insert_with(FastMap::default);
    if let Some(old) = reg.get(&id) {
        if old.name != name {
            return Err(Error::invalid(format!("function names {name:?} and {:?} have the same stable hash", old.name)));
        }
    }
    let entry = Entry { name: name.into(), arg: A::type_name(), result: std::any::type_name::<T>(), func: Arc::new(func) };
    reg.insert(id, entry);
    Ok(())
}

/// Whether a function is registered under `name`.
pub fn registered(name: &str) -> bool {
    REGISTRY.read().as_ref().is_some_and(|r| r.get(&id_of(name)).is_some_and(|e| e.name == name))
}

/// The function registered as `id`, typed; `name` is what the pool says
/// (for the error).
pub(crate) fn lookup<A: Persistent, T: Load>(id: u64, name: &str) -> Result<Func<A, T>> {
    let reg = REGISTRY.read();
    let e = reg.as_ref().and_then(|r| r.get(&id)).ok_or_else(|| Error::UnknownFunction { name: name.into() })?;
    e.func.downcast_ref::<Func<A, T>>().cloned().ok_or_else(|| Error::LayoutMismatch {
        path: std::path::PathBuf::new(),
        type_name: format!("lazy function {:?}", e.name),
        changed: format!(
            "registered as ({}) -> {}, the thunk needs ({}) -> {}",
            e.arg,
            e.result,
            A::type_name(),
            std::any::type_name::<T>()
        ),
    })
}
