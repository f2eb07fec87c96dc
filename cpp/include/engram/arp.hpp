// engram/arp.hpp: acquire-release persistency (ARP) for C++17.
//
// What it does: `engram::persistent<T>` is a std::atomic<T> whose stores, when
// the object lives in a persistent pool, are persists ordered by the chosen
// persistency model: SCP, epoch persistency (sequence points), RCBSP (every
// acquire/release a full persist barrier), ARP (releases order what came
// before, acquires what comes after, transitively through synchronization)
// or ARP+VA (acquires/releases annotated `engram::volatile_sync` order nothing
// persistent). `engram::sequence_point()` ends the thread's persist epoch.
//
// How it maps to x86 (TSO, CLWB, SFENCE) — see docs/persistency.md:
//   every persist      store; CLWB of its line            (all models)
//   SCP                SFENCE after every persist
//   epoch              SFENCE before every release (another thread's
//                      sequence point orders through happens-before, and
//                      its SFENCE cannot complete this thread's CLWBs)
//   RCBSP              SFENCE before every release and after every acquire
//   ARP                SFENCE before every release; acquires are free (TSO
//                      never lets a later store, hence a later persist, pass
//                      an earlier load)
//   ARP+VA             as ARP, nothing for annotated releases
//   persistent acquire or release (an atomic in the pool; not annotated
//   under ARP+VA): CLWB; SFENCE right after it, in every model (it is
//   itself ordered before what follows)
//   full fence         MFENCE; sequence point: SFENCE (every model)
//
// Invariants: a persistent<T> is lock-free and at most 8 bytes, naturally
// aligned (8-byte failure atomicity); it is "persistent" iff its address is
// inside the runtime pool's ARP data region. Crash behaviour: what survives is exactly what
// the model's persist memory order allows (engram-model's arp checker decides
// it from a trace written in trace mode).
//
// Errors are `engram::Error` exceptions carrying the engine's stable codes
// (the C ABI's status codes, include/engram.h). The pool is the engine's,
// opened through its C ABI (link libengram_ffi).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>

namespace engram {

/// The engine's stable error codes (the C ABI's `engram_code`, include/engram.h).
/// Named here are the ones this library raises itself; an Error raised by the
/// engine carries whatever code the ABI returned (compare `code()` or
/// `status()` with the values in include/engram.h).
enum class ErrorCode : int {
  io = 1,
  not_a_pool = 2,
  wrong_layout = 6,
  pool_full = 9,
  invalid_argument = 10,
  exists = 13,
  root_type = 14,
  busy = 18,
  closed = 100,
  internal = 102,
};

/// Every failure of the library.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
  /// The code as the ABI's engram_status.
  int status() const noexcept { return static_cast<int>(code_); }

 private:
  ErrorCode code_;
};

/// Persistency models (same names as engram-model's `arp::Model`).
enum class Model { scp, epoch, rcbsp, arp, arp_va };

/// Parses "scp", "epoch", "rcbsp", "arp", "arp_va"; throws invalid_argument.
Model parse_model(const std::string& name);
const char* model_name(Model m) noexcept;

/// The volatile annotation of one acquire or release.
enum class Annotation { none, volatile_sync };
constexpr Annotation volatile_sync = Annotation::volatile_sync;

/// A region of persistent memory: an RAII handle over an engine pool opened
/// through the C ABI (include/engram.h, crates/engram-ffi). The pool has
/// layout "engram.arp" and one root, "arp", naming a byte array allocated
/// through the ABI (failure-atomic with the root); the ARP data region is
/// the 64-byte-aligned `size` bytes inside that array. `base()`/`size()`
/// are the data region (what persistent<T> and the tracer see);
/// `pool_base()`/`pool_size()` the whole mapping, from engram_pool_info.
/// Crash behaviour: the root and its array are created in one engine
/// region, so a crash during `create` leaves no root (open then fails with
/// root_type); the data region's own persists are this library's (CLWB +
/// SFENCE per the model), the engine never writes it after creation.
class Pool {
 public:
  /// Creates (or overwrites) the pool file `path` with a zeroed data region
  /// of `size` bytes.
  static Pool create(const std::string& path, std::size_t size);
  /// Opens an existing pool (the engine recovers it if needed) and finds
  /// its data region.
  static Pool open(const std::string& path);
  Pool(Pool&& o) noexcept;
  Pool& operator=(Pool&& o) noexcept;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  /// Closes the pool cleanly (errors are ignored; use close() to see them).
  ~Pool();
  /// Closes the pool cleanly; throws the engine's error (the handle is then
  /// still owned and closed again by the destructor).
  void close();

  void* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  /// The engine pool's first byte and mapped size (engram_pool_info).
  void* pool_base() const noexcept { return pool_base_; }
  std::size_t pool_size() const noexcept { return pool_size_; }
  /// The C ABI handle (an engram_pool; 0 once moved from or closed).
  std::uint64_t handle() const noexcept { return handle_; }
  bool contains(const void* p) const noexcept {
    auto a = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(base_);
    return base_ != nullptr && a >= b && a < b + size_;
  }
  /// Offset of `p` in the pool (throws invalid_argument outside it).
  std::uint64_t offset_of(const void* p) const;
  /// Typed pointer at `offset` (throws invalid_argument if it does not fit).
  template <class T>
  T* at(std::uint64_t offset) const {
    if (offset + sizeof(T) > size_ || offset % alignof(T) != 0)
      throw Error(ErrorCode::invalid_argument, "offset out of the pool or misaligned");
    return reinterpret_cast<T*>(static_cast<char*>(base_) + offset);
  }

 private:
  explicit Pool(std::uint64_t handle) : handle_(handle) {}
  /// Fills base_/size_ from the root and pool_base_/pool_size_ from info.
  void locate();
  void release() noexcept;
  std::uint64_t handle_ = 0;
  void* base_ = nullptr;
  std::size_t size_ = 0;
  void* pool_base_ = nullptr;
  std::size_t pool_size_ = 0;
};

/// Counts of the x86 instructions the mapping issued (for tests and benches).
struct MappingStats {
  std::uint64_t persists = 0, clwb = 0, sfence = 0, mfence = 0;
};

class Tracer;

/// Process-wide configuration: the model, the pool, and an optional tracer.
/// Set it before any thread uses persistent<T>; not changed concurrently.
struct Runtime {
  static void init(Model model, const Pool* pool, Tracer* tracer = nullptr) noexcept;
  static Model model() noexcept;
  static const Pool* pool() noexcept;
  static Tracer* tracer() noexcept;
  /// This thread's instruction counts since the last reset.
  static MappingStats& stats() noexcept;
};

/// Trace mode: records every operation in engram-model's `arp-trace 1` text
/// format (docs in crates/engram-model/src/arp/trace.rs), one global order,
/// with the store each acquire read from. Operations take one mutex, so the
/// trace order is the execution order.
class Tracer {
 public:
  /// Starts a trace of `pool` (its current content is the trace's base).
  explicit Tracer(const Pool& pool);
  /// The trace so far, as text.
  std::string text() const;
  /// Writes the trace to `path` (throws io).
  void write(const std::string& path) const;
  /// This thread's id in the trace (assigned on first use).
  std::uint32_t thread_id();

  // Used by persistent<T>: performs `op` and records it atomically.
  template <class F>
  auto record(const void* addr, std::size_t len, const char* kind, std::memory_order mo, Annotation a,
              const void* data, bool is_cas, F&& op) -> decltype(op());
  /// Records an x86-mapping event ("clwb" with an address, "sfence"), a
  /// sequence point ("sp") or a full fence ("fence").
  void record_other(const char* kind, const void* addr);

 private:
  void append(const void* addr, std::size_t len, const char* kind, std::memory_order mo, Annotation a,
              const void* data);
  std::uint32_t thread_id_locked();
  mutable std::mutex mu_;
  const Pool& pool_;
  std::string out_;
  std::uint64_t events_ = 0;
  std::unordered_map<std::uintptr_t, std::uint64_t> last_writer_;
  std::uint32_t next_thread_ = 0;
};

namespace detail {
void clwb(const void* p) noexcept;
void sfence() noexcept;
void mfence() noexcept;
bool is_release(std::memory_order mo) noexcept;
bool is_acquire(std::memory_order mo) noexcept;
/// The x86 mapping around one operation (the table at the top of this file).
void before(bool persistent, bool acquire, bool release, Annotation a) noexcept;
void after(const void* p, bool persistent, bool store, bool acquire, bool release, Annotation a) noexcept;
}  // namespace detail

/// Ends the calling thread's persist epoch (two-sided barrier in every model).
void sequence_point();
/// atomic_thread_fence(seq_cst) with its persistency meaning (a full barrier).
void full_fence();

/// An atomic whose stores persist under the runtime's model when it lives in
/// the pool. Same interface as std::atomic<T> for the common operations, with
/// an extra Annotation on every acquire/release.
template <class T>
class persistent {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "persistent<T>: T must be trivially copyable, at most 8 bytes");

 public:
  persistent() noexcept = default;
  constexpr persistent(T v) noexcept : v_(v) {}  // NOLINT: mirrors std::atomic
  persistent(const persistent&) = delete;
  persistent& operator=(const persistent&) = delete;

  /// Whether this object lives in the pool (its stores are persists).
  bool is_persistent() const noexcept {
    auto* p = Runtime::pool();
    return p != nullptr && p->contains(this);
  }

  void store(T v, std::memory_order mo = std::memory_order_seq_cst, Annotation a = Annotation::none) noexcept {
    bool pers = is_persistent(), rel = detail::is_release(mo);
    detail::before(pers, false, rel, a);
    if (auto* t = Runtime::tracer())
      t->record(this, sizeof(T), "st", mo, a, &v, false, [&] { v_.store(v, mo); return 0; });
    else
      v_.store(v, mo);
    detail::after(this, pers, true, false, rel, a);
  }

  T load(std::memory_order mo = std::memory_order_seq_cst, Annotation a = Annotation::none) const noexcept {
    bool acq = detail::is_acquire(mo);
    T v;
    // relaxed loads order nothing: not recorded
    if (auto* t = Runtime::tracer(); t != nullptr && acq)
      v = t->record(this, sizeof(T), "ld", mo, a, nullptr, false, [&] { return v_.load(mo); });
    else
      v = v_.load(mo);
    detail::after(this, is_persistent(), false, acq, false, a);
    return v;
  }

  T exchange(T v, std::memory_order mo = std::memory_order_seq_cst, Annotation a = Annotation::none) noexcept {
    bool pers = is_persistent();
    detail::before(pers, detail::is_acquire(mo), detail::is_release(mo), a);
    T old;
    if (auto* t = Runtime::tracer())
      old = t->record(this, sizeof(T), "rmw", mo, a, &v, false, [&] { return v_.exchange(v, mo); });
    else
      old = v_.exchange(v, mo);
    detail::after(this, pers, true, detail::is_acquire(mo), detail::is_release(mo), a);
    return old;
  }

  bool compare_exchange_strong(T& expected, T desired, std::memory_order mo = std::memory_order_seq_cst,
                               Annotation a = Annotation::none) noexcept {
    bool pers = is_persistent();
    detail::before(pers, detail::is_acquire(mo), detail::is_release(mo), a);
    bool ok;
    auto run = [&] { return v_.compare_exchange_strong(expected, desired, mo, relaxed_part(mo)); };
    if (auto* t = Runtime::tracer())
      ok = t->record(this, sizeof(T), "rmw", mo, a, &desired, true, run);  // a failed CAS is traced as a load
    else
      ok = run();
    detail::after(this, pers, ok, detail::is_acquire(mo), detail::is_release(mo), a);
    return ok;
  }

  T fetch_add(T d, std::memory_order mo = std::memory_order_seq_cst, Annotation a = Annotation::none) noexcept {
    static_assert(std::is_integral<T>::value, "fetch_add needs an integral T");
    T old = v_.load(std::memory_order_relaxed);
    while (!compare_exchange_strong(old, static_cast<T>(old + d), mo, a)) {
    }
    return old;
  }

 private:
  static std::memory_order relaxed_part(std::memory_order mo) noexcept {
    return mo == std::memory_order_acq_rel || mo == std::memory_order_release ? std::memory_order_relaxed
           : mo == std::memory_order_seq_cst                                  ? std::memory_order_seq_cst
                                                                              : mo;
  }
  std::atomic<T> v_{};
  static_assert(std::atomic<T>::is_always_lock_free, "persistent<T> must be lock-free");
};

template <class F>
auto Tracer::record(const void* addr, std::size_t len, const char* kind, std::memory_order mo, Annotation a,
                    const void* data, bool is_cas, F&& op) -> decltype(op()) {
  std::lock_guard<std::mutex> g(mu_);
  auto r = op();
  bool failed = false;
  if constexpr (std::is_same<decltype(r), bool>::value) failed = is_cas && !r;
  append(addr, len, failed ? "ld" : kind, mo, a, data);
  return r;
}

}  // namespace engram
